package api

import "time"

// DeadLetter is one stored dead letter as GET
// /v1/downstreams/{name}/dead lists it.
type DeadLetter struct {
	Seq          uint64    `json:"seq"`
	JobID        string    `json:"job_id"`
	Reason       string    `json:"reason"`
	Error        string    `json:"error"`
	Attempts     int       `json:"attempts"`
	Time         time.Time `json:"time"`
	PayloadBytes int       `json:"payload_bytes"`
}

// DeadLetterDetail is one dead letter as GET
// /v1/downstreams/{name}/dead/{seq} shows it: the listed fields, the
// payload (base64 in JSON) and the producer's headers (never the Shaper-*
// ones the daemon added).
type DeadLetterDetail struct {
	DeadLetter
	Payload []byte              `json:"payload_base64"`
	Headers map[string][]string `json:"headers"`
}

// DeadLetterList is the body of GET /v1/downstreams/{name}/dead: the
// matching dead letters, oldest first, at most the limit asked for, and
// how many match in all.
type DeadLetterList struct {
	DeadLetters []DeadLetter `json:"dead_letters"`
	Total       int          `json:"total"`
}

// ReplayBody is the body of POST /v1/downstreams/{name}/dead/replay, every
// field optional: at most Rate replays ("5/s"; default the downstream's
// rate ÷ 10), at most Limit of them (default every match), only those
// with Reason (default any). The fields are in the order shaperctl has
// always sent them.
type ReplayBody struct {
	Limit  *int    `json:"limit,omitempty"`
	Rate   *string `json:"rate,omitempty"`
	Reason *string `json:"reason,omitempty"`
}

// ReplayStarted answers a replay request (202): how many dead letters will
// be replayed.
type ReplayStarted struct {
	Replaying int `json:"replaying"`
}

// DeadLetterSummary is a downstream's "dead_letters" in GET
// /v1/downstreams:
//
//	"dead_letters": {"stored": 5, "oldest_seconds": 312.5}
//
// OldestSeconds is the age of the oldest stored dead letter, absent when
// none is stored.
type DeadLetterSummary struct {
	Stored        int      `json:"stored"`
	OldestSeconds *float64 `json:"oldest_seconds,omitempty"`
}
