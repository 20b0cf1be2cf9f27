package producer

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Errors of the job protocol. A rejection is returned as a *RejectedError,
// which matches ErrRejected and the sentinel of its reason under errors.Is:
//
//	if errors.Is(err, producer.ErrQueueFull) { ... }
//
// Transport failures are nats.go's errors (nats.ErrTimeout,
// nats.ErrNoResponders, nats.ErrConnectionClosed, ...) or the context's,
// wrapped with the subject; match them with errors.Is too.
var (
	// ErrRejected matches every rejection, whatever its reason.
	ErrRejected = errors.New("producer: job rejected")

	// ErrRateLimited: the job's admission key is over its limit
	// (Shaper-Reason rate_limited). Waiting Retry-After helps.
	ErrRateLimited = errors.New("producer: rejected: rate_limited")
	// ErrQueueFull: the downstream's queue is at capacity (queue_full).
	// Waiting Retry-After, until a slot frees at the drain rate, helps.
	ErrQueueFull = errors.New("producer: rejected: queue_full")
	// ErrUnknownDownstream: no downstream of that name is configured
	// (unknown_downstream). Waiting does not help.
	ErrUnknownDownstream = errors.New("producer: rejected: unknown_downstream")
	// ErrPayloadTooLarge: the payload is over ingress.max_payload
	// (payload_too_large). Waiting does not help.
	ErrPayloadTooLarge = errors.New("producer: rejected: payload_too_large")
	// ErrBadRequest: a header is repeated, too long, not UTF-8 or not
	// valid, e.g. a Shaper-Max-Wait that is not a positive duration of at
	// most 168h (bad_request). Waiting does not help.
	ErrBadRequest = errors.New("producer: rejected: bad_request")
	// ErrUnavailable: the daemon cannot take the job now (shutting down, its
	// store or shared admission store is down: unavailable). Waiting helps;
	// another instance may answer the retry.
	ErrUnavailable = errors.New("producer: rejected: unavailable")
	// ErrWouldExpire: the job could not start within its max wait
	// (would_expire, with queue.reject_would_expire). Waiting Retry-After,
	// until the queue ahead has drained enough, helps.
	ErrWouldExpire = errors.New("producer: rejected: would_expire")

	// ErrBadReply: the reply is not a shaperd reply (no Shaper-Status of
	// accepted or rejected); something else answers on the subject.
	ErrBadReply = errors.New("producer: reply is not a shaperd reply")
)

// Rejection reasons, the values of Result.Reason and Shaper-Reason.
const (
	ReasonRateLimited       = "rate_limited"
	ReasonQueueFull         = "queue_full"
	ReasonUnknownDownstream = "unknown_downstream"
	ReasonPayloadTooLarge   = "payload_too_large"
	ReasonBadRequest        = "bad_request"
	ReasonUnavailable       = "unavailable"
	ReasonWouldExpire       = "would_expire"
)

// reasonErrs maps each reason to its sentinel.
var reasonErrs = map[string]error{
	ReasonRateLimited:       ErrRateLimited,
	ReasonQueueFull:         ErrQueueFull,
	ReasonUnknownDownstream: ErrUnknownDownstream,
	ReasonPayloadTooLarge:   ErrPayloadTooLarge,
	ReasonBadRequest:        ErrBadRequest,
	ReasonUnavailable:       ErrUnavailable,
	ReasonWouldExpire:       ErrWouldExpire,
}

// retryHelps reports whether waiting can change the answer to a rejection
// for reason (the reasons shaperd sends Retry-After with).
func retryHelps(reason string) bool {
	switch reason {
	case ReasonRateLimited, ReasonQueueFull, ReasonUnavailable, ReasonWouldExpire:
		return true
	}
	return false
}

// RejectedError is the error for a job shaperd rejected; Result is the
// parsed reply. It matches ErrRejected and its reason's sentinel under
// errors.Is (a reason this package does not know matches ErrRejected only).
// Use errors.As to read RetryAfter or the daemon's error text.
type RejectedError struct {
	Result
}

// Error returns "producer: job rejected: <reason>: <daemon's text>" and the
// Retry-After when there is one.
func (e *RejectedError) Error() string {
	var b strings.Builder
	b.WriteString("producer: job rejected: ")
	b.WriteString(orDefault(e.Reason, "no reason given"))
	if e.ErrorText != "" {
		b.WriteString(": ")
		b.WriteString(e.ErrorText)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter.Round(time.Millisecond))
	}
	return b.String()
}

// Is reports whether target is ErrRejected or the sentinel of e's reason.
func (e *RejectedError) Is(target error) bool {
	return target == ErrRejected || (target != nil && reasonErrs[e.Reason] == target)
}

func orDefault(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}
