package producer

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/shaper/outcome"
)

// Result is shaperd's answer to one job, parsed from the reply's headers
// and JSON body. Where both carry a value (status, reason, Retry-After) the
// header wins: headers are what the protocol guarantees.
//
// An accepted job has Accepted, JobID and Downstream set, and either
// Position and ETA or, for a repeated Nats-Msg-Id, Duplicate (JobID is then
// the original job's, State its current state). A rejected job has Reason,
// its ErrorText and, where waiting helps, RetryAfter.
type Result struct {
	Accepted   bool
	JobID      string // shaperd's id of the job, also its Idempotency-Key downstream
	Downstream string
	Position   int           // 1-based place in the queue when accepted; 0 for a duplicate
	ETA        time.Duration // predicted wait until the job starts (milliseconds)
	// NotBefore is the earliest start of a delayed job ("not_before"; ETA
	// is at or after it), zero for a job that was not delayed.
	NotBefore time.Time
	// Paused: accepted while the downstream is paused until resumed
	// ("paused"); no start is scheduled, so ETA is unknown (zero).
	Paused    bool
	Duplicate bool // a job with the same Nats-Msg-Id was already accepted
	// State is the first job's state when Duplicate ("state"): a
	// duplicate's outcome goes to the first job's Shaper-Reply-To, so
	// this, and Status, are how its sender learns where it stands. Empty
	// otherwise, and from a shaperd that does not keep records.
	State      outcome.State
	Reason     string        // when rejected: one of the Reason constants
	RetryAfter time.Duration // when rejected and waiting helps: whole seconds, rounded up by shaperd
	ErrorText  string        // when rejected: shaperd's explanation, for people
}

// replyBody is the JSON body of a reply, accepted or rejected.
type replyBody struct {
	Status            string  `json:"status"`
	Downstream        string  `json:"downstream"`
	JobID             string  `json:"job_id"`
	Duplicate         bool    `json:"duplicate"`
	State             string  `json:"state"`
	Position          int     `json:"position"`
	ETASeconds        float64 `json:"eta_seconds"`
	Paused            bool    `json:"paused"`
	NotBefore         string  `json:"not_before"`
	Reason            string  `json:"reason"`
	RetryAfterSeconds float64 `json:"retry_after_seconds"`
	Error             string  `json:"error"`
}

// parseReply turns a reply into a Result. The error is nil for an accepted
// job, a *RejectedError for a rejected one and ErrBadReply when the reply
// says neither.
func parseReply(m *nats.Msg) (Result, error) {
	var b replyBody
	_ = json.Unmarshal(m.Data, &b) // a missing or odd body leaves the headers to speak
	status := orDefault(m.Header.Get(HeaderStatus), b.Status)
	r := Result{
		JobID: b.JobID, Downstream: b.Downstream, Duplicate: b.Duplicate, State: outcome.State(b.State), Position: b.Position,
		ETA: seconds(b.ETASeconds), Paused: b.Paused,
		Reason:    orDefault(m.Header.Get(HeaderReason), b.Reason),
		ErrorText: b.Error,
	}
	if t, err := time.Parse(time.RFC3339, b.NotBefore); err == nil {
		r.NotBefore = t
	}
	r.RetryAfter = seconds(b.RetryAfterSeconds)
	if s, err := strconv.ParseFloat(m.Header.Get(HeaderRetryAfter), 64); err == nil {
		r.RetryAfter = seconds(s)
	}
	switch status {
	case "accepted":
		r.Accepted, r.Reason, r.RetryAfter = true, "", 0
		return r, nil
	case "rejected":
		return r, &RejectedError{Result: r}
	}
	return Result{}, ErrBadReply
}

// seconds converts a count of seconds from the wire to a Duration; a
// negative, NaN or absurd value is 0.
func seconds(s float64) time.Duration {
	if !(s > 0) || s > math.MaxInt64/float64(time.Second) {
		return 0
	}
	return time.Duration(math.Round(s * float64(time.Second)))
}
