package shaper

import (
	"context"
	"time"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/batch"
	"github.com/shaperd/shaper/shaper/outcome"
	"github.com/shaperd/shaper/shaper/policy"
	"github.com/shaperd/shaper/shaper/settings"
)

// Reason is why a job was rejected or dropped; the values are the
// reason labels of the metrics and the dead letters.
type Reason string

// Rejection reasons (never accepted) and drop reasons (accepted, then lost).
const (
	ReasonRateLimited       Reason = "rate_limited"
	ReasonQueueFull         Reason = "queue_full"
	ReasonUnknownDownstream Reason = "unknown_downstream"
	ReasonPayloadTooLarge   Reason = "payload_too_large"
	ReasonBadRequest        Reason = "bad_request"
	ReasonUnavailable       Reason = "unavailable"
	// ReasonWouldExpire: the job's predicted start (its place in the queue
	// at the drain rate) is past its max wait (LaneSettings.RejectWouldExpire).
	ReasonWouldExpire Reason = "would_expire"

	ReasonExpired  Reason = "expired"
	ReasonShutdown Reason = "shutdown"
	ReasonFailed   Reason = "failed"

	// ReasonSlowConsumer counts intake messages NATS dropped before the
	// daemon read them (see metrics.Metrics.Dropped).
	ReasonSlowConsumer Reason = "nats_slow_consumer"
)

// Receipt is the answer to a submission.
type Receipt struct {
	Accepted   bool
	JobID      string
	Downstream string
	Position   int           // 1-based place in the queue when accepted
	ETA        time.Duration // predicted wait until the job starts
	Reason     Reason        // when rejected
	RetryAfter time.Duration // when rejected and a retry can help; computed, never guessed
	Err        error         // human-readable cause when rejected
	// Duplicate: a durable store already held a job with the same DedupeID;
	// JobID is that job's (Accepted is true, nothing new was queued).
	Duplicate bool
	// NotBefore is an accepted delayed job's earliest start (ETA is at or
	// after it); zero for a job that was not delayed.
	NotBefore time.Time
	// Paused: accepted while the downstream is paused until resumed, so
	// no start is scheduled and ETA is unknown (zero).
	Paused bool
}

// Sink delivers a job to a downstream. Deliver is called concurrently up to
// the lane's concurrency. A nil error means done. Errors are classified:
// *policy.PushbackError (downstream asked to wait; does not burn an attempt),
// *policy.PermanentError (no retry); anything else is retried with backoff.
// The Feedback is what the answer said about the downstream's limit,
// whatever the error (a success can say the quota is used up); a sink
// that learns nothing returns the zero Feedback.
//
// DeliverBatch sends one call carrying every job of c, in c's order
// (LaneSettings.Batch): its error is Deliver's for the whole call (a
// pushback or a failure of every job in it); with a nil error,
// Feedback.Failed names the jobs the answer says failed, and the rest
// succeeded.
type Sink interface {
	Deliver(ctx context.Context, job *queue.Job) (Feedback, error)
	DeliverBatch(ctx context.Context, c Call) (Feedback, error)
}

// Call is one start of a lane with a batch: several jobs in one call.
type Call struct {
	ID       string // new per call: Shaper-Batch-Id, also the Idempotency-Key
	Jobs     []*queue.Job
	Encoding batch.Encoding
}

// Feedback is what one answer told besides its outcome. The zero value
// tells nothing.
type Feedback struct {
	// Quota is the downstream's advertised rate limit; nil = none.
	Quota *policy.Quota
	// Malformed counts rate-limit header fields that were present but
	// could not be read; they were ignored. Counted in
	// shaper_downstream_bad_ratelimit_headers_total.
	Malformed int
	// Result is the downstream's answer to this try (nil: the lane keeps
	// no records, or the try got no answer).
	Result *outcome.Result
	// Failed, after a call's 2xx answer, are the jobs it names as failed
	// (batch.ParseAnswer), by job id; nil: every job succeeded.
	Failed map[string]batch.Failure
}

// DeadLetter is a job that failed for good or was dropped, with why.
type DeadLetter struct {
	Subject string // the lane's dead_letter subject (never empty when sent)
	Job     *queue.Job
	Reason  Reason
	Err     string
}

// DeadLetterer publishes dead letters. Implemented outside this package
// (the daemon publishes to NATS). DeadLetter returns the dead letter's
// sequence in its store (0: published, not stored), which the job's
// record names.
type DeadLetterer interface {
	DeadLetter(ctx context.Context, dl DeadLetter) (seq uint64, err error)
}

// The configuration (package settings) by the names the shaper's users
// know.
type (
	// Settings is the whole shaper configuration, as built by
	// config.ShaperSettings.
	Settings = settings.Shaper
	// LaneSettings configures one downstream.
	LaneSettings     = settings.Lane
	Policies         = settings.Policies
	DeadLetterLimits = settings.DeadLetterLimits
	RetryPolicy      = settings.Retry
	SinkSpec         = settings.Sink
	HTTPSinkSpec     = settings.HTTPSink
	NATSSinkSpec     = settings.NATSSink
	OutcomeSettings  = settings.Outcomes
	BatchSettings    = settings.Batch
	TracingSettings  = settings.Tracing
	Placement        = settings.Placement
)
