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
	// ID is unique and is the Idempotency-Key sent downstream. Left empty,
	// it is given by the lane, or by a kind that names the jobs it stores
	// (a Finder), which sets Named.
	ID         string
	Downstream string        // lane name
	Key        string        // admission key ("" = the shared anonymous key)
	Cost       int           // admission cost, >= 1 (0 is treated as 1); see JobCost
	Payload    []byte        // opaque
	Header     http.Header   // producer headers to pass on (may be nil)
	MaxWait    time.Duration // per-job override of the lane's max wait; 0 = lane default
	// DedupeID is the producer's Nats-Msg-Id; a durable queue stores the job
	// under it so the store itself refuses a repeat ("" = none).
	DedupeID string
	// Priority is the producer's Shaper-Priority plus one: 1 is level 0,
	// the most urgent. The zero value (no priority given) is the least
	// urgent level of the queue the job is in (Settings.Priorities − 1),
	// so a job built without one never jumps ahead. See Level.
	Priority int
	// NotBefore is the earliest start of a delayed job (Shaper-Delay,
	// Shaper-Not-Before); zero, or not after the instant it is offered,
	// = not delayed.
	NotBefore time.Time
	// ReplyTo is the producer's Shaper-Reply-To: the subject the job's
	// final outcome is published on once it ends ("" = none). A durable
	// queue stores it with the job.
	ReplyTo string

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
	// Batch names the call that carried the try in progress, on a lane
	// that sends several jobs per call (nil = none; not stored). The jobs
	// of a call share it; a pointer keeps Job in its allocation size class.
	Batch *string
	// Named: a Finder gave ID when it stored the job, and finds the job by
	// it while it is stored.
	Named bool
}

// JobCost is j's cost in units of capacity, admission and drain time:
// Job.Cost, at least 1.
func JobCost(j *Job) int { return max(j.Cost, 1) }

// Level is j's priority level in a queue of levels levels (at least 1):
// Priority − 1, or the least urgent level when j has no priority or one
// past the levels (a queue configured with fewer levels since).
func Level(j *Job, levels int) int {
	if j.Priority < 1 || j.Priority > levels {
		return levels - 1
	}
	return j.Priority - 1
}

// readyAt is when a job offered at at becomes ready: at, or its NotBefore
// when later (a delayed job).
func readyAt(j *Job, at time.Time) time.Time {
	if j.NotBefore.After(at) {
		return j.NotBefore
	}
	return at
}

// BatchID is the id of the call that carried job's try in progress ("":
// none).
func (j *Job) BatchID() string {
	if j.Batch == nil {
		return ""
	}
	return *j.Batch
}
