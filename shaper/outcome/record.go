package outcome

import (
	"time"
)

// State is where a job stands. A job is queued or delayed when accepted,
// started at each try, retrying between tries, and ends in one of the
// final states.
type State string

// The states of a job, and Unknown for an id with no record.
const (
	Queued    State = "queued"
	Delayed   State = "delayed"
	Started   State = "started"
	Retrying  State = "retrying"
	Succeeded State = "succeeded"
	Failed    State = "failed"
	Expired   State = "expired"
	Dropped   State = "dropped"
	// Unknown is the answer for an id never seen, or whose record is past
	// its keep.
	Unknown State = "unknown"
)

// States are the states a record can hold, in the order a job passes
// them (the metrics' state labels).
var States = []State{Queued, Delayed, Started, Retrying, Succeeded, Failed, Expired, Dropped}

// Final reports whether s ends a job.
func (s State) Final() bool {
	switch s {
	case Succeeded, Failed, Expired, Dropped:
		return true
	}
	return false
}

// Valid reports whether s is one of States.
func (s State) Valid() bool {
	for _, v := range States {
		if s == v {
			return true
		}
	}
	return false
}

// Record is what became of one job: the JSON a status look-up answers and
// an event carries.
type Record struct {
	JobID      string    `json:"job_id"`
	Downstream string    `json:"downstream"`
	State      State     `json:"state"`
	Attempts   int       `json:"attempts"`
	AcceptedAt time.Time `json:"accepted_at,omitzero"`
	NotBefore  time.Time `json:"not_before,omitzero"`
	// StartedAt is when the last try started.
	StartedAt time.Time `json:"started_at,omitzero"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	// Error is why the job did not succeed (failed, expired, dropped), or
	// the last try's error while it is retrying.
	Error string `json:"error,omitempty"`
	// DeadLetterSeq is the sequence of the job's dead letter in its
	// downstream's dead-letter stream, where one was stored.
	DeadLetterSeq uint64 `json:"dead_letter_seq,omitempty"`
	// Result is the downstream's answer to the last try (nil: none yet,
	// or the try got no answer).
	Result *Result `json:"result,omitempty"`
	// BatchID names the call that carried the last try, on a downstream
	// with a batch (its Shaper-Batch-Id).
	BatchID string `json:"batch_id,omitempty"`
}

// Result is a downstream's answer to one try: an HTTP response, or a NATS
// request sink's reply.
type Result struct {
	// StatusCode is the HTTP status (0: a NATS reply).
	StatusCode int `json:"status_code,omitempty"`
	// Headers are the answer's Content-Type, Location and ETag (HTTP), or
	// a NATS reply's headers.
	Headers map[string]string `json:"headers,omitempty"`
	// Body is the first result_bytes of the answer's body.
	Body []byte `json:"body_base64,omitempty"`
	// Bytes is the size of the whole body, Truncated whether Body holds
	// less of it.
	Bytes     int  `json:"bytes"`
	Truncated bool `json:"truncated,omitempty"`
}

// ContentType is the answer's Content-Type ("" when it had none).
func (r *Result) ContentType() string {
	if r == nil {
		return ""
	}
	return r.Headers["Content-Type"]
}
