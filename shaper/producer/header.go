package producer

import "github.com/nats-io/nats.go"

// Header names of the job protocol, in the canonical form shaperd reads and
// writes them in. This is the one place the protocol's names are written:
// shaperd, its sinks, its configuration defaults and shaperctl use these
// constants.
const (
	// A producer sends these with a job.
	HeaderKey         = "Shaper-Key" // the admission key; the default name, ingress.key_header may name another
	HeaderMsgID       = nats.MsgIdHdr
	HeaderMaxWait     = "Shaper-Max-Wait"
	HeaderCost        = "Shaper-Cost"
	HeaderPriority    = "Shaper-Priority"
	HeaderDelay       = "Shaper-Delay"
	HeaderNotBefore   = "Shaper-Not-Before"
	HeaderContentType = "Content-Type"       // the one producer header passed on to an HTTP downstream
	HeaderReplyTo     = "Shaper-Reply-To"    // the subject a job's final outcome is published on
	HeaderBulkAtomic  = "Shaper-Bulk-Atomic" // on a bulk request: "true" queues every job or none

	// shaperd's reply to a job carries these. A downstream's 429 or 503
	// may carry HeaderRetryAfter too.
	HeaderStatus     = "Shaper-Status"
	HeaderReason     = "Shaper-Reason" // also on a dead letter: why the job was given up
	HeaderRetryAfter = "Retry-After"
	HeaderAccepted   = "Shaper-Accepted" // on a bulk reply: how many of its jobs were accepted
	HeaderRejected   = "Shaper-Rejected" // on a bulk reply: how many were rejected

	// shaperd adds these to every delivery to a downstream.
	HeaderJobID          = "Shaper-Job-Id"
	HeaderAttempt        = "Shaper-Attempt"
	HeaderIdempotencyKey = "Idempotency-Key" // the job ID, the same on every try

	// A dead letter carries these besides HeaderReason, HeaderJobID and
	// HeaderAttempt.
	HeaderError      = "Shaper-Error"
	HeaderDownstream = "Shaper-Downstream"

	// A job's outcome (on its Shaper-Reply-To), its events and the answer
	// to a status look-up carry these besides HeaderJobID, HeaderAttempt,
	// HeaderError and HeaderContentType.
	HeaderState      = "Shaper-State"       // the job's state: queued, started, succeeded, …
	HeaderStatusCode = "Shaper-Status-Code" // the downstream's HTTP status; absent for a NATS sink
)
