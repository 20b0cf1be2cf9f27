package queue

import (
	"net/http"
	"time"
)

// Job is one unit of work for a downstream, as every queue kind holds it.
// Payload and Header are passed to the sink untouched (the sink adds the
// Shaper-* headers). The intake fills the first block; the shaper the
// second.
type Job struct {
	ID         string        // unique; also the Idempotency-Key sent downstream
	Downstream string        // lane name
	Key        string        // admission key ("" = the shared anonymous key)
	Cost       int           // admission cost, >= 1 (0 is treated as 1); see JobCost
	Payload    []byte        // opaque
	Header     http.Header   // producer headers to pass on (may be nil)
	MaxWait    time.Duration // per-job override of the lane's max wait; 0 = lane default
	// DedupeID is the producer's Nats-Msg-Id; a durable queue stores the job
	// under it so the store itself refuses a repeat ("" = none).
	DedupeID string

	// Set by the shaper.
	Enqueued time.Time
	Deadline time.Time // zero = no deadline
	Attempt  int       // number of the try in progress, from 1
	// Failures counts the tries that count against the retry policy's
	// MaxAttempts (pushbacks do not). A durable queue restores it (with
	// Attempt) when it hands back a job tried before.
	Failures int
	// Slot is the schedule slot of the try in progress and Dispatched when
	// the scheduler started it (Dispatched − Slot is the pacer's lag).
	Slot, Dispatched time.Time
}

// JobCost is j's cost in units of capacity, admission and drain time:
// Job.Cost, at least 1.
func JobCost(j *Job) int { return max(j.Cost, 1) }
