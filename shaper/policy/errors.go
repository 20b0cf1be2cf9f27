package policy

import (
	"errors"
	"fmt"
	"time"
)

// The errors a sink returns to say how the downstream answered; Classify
// turns them into an Answer's Class. Any other error is Failed.

// PushbackError reports that the downstream asked us to slow down (HTTP 429
// or 503 with Retry-After). The lane pauses for RetryAfter, then retries.
type PushbackError struct {
	RetryAfter time.Duration
	Err        error
}

func (e *PushbackError) Error() string {
	return fmt.Sprintf("downstream pushed back for %s: %v", e.RetryAfter, e.Err)
}
func (e *PushbackError) Unwrap() error { return e.Err }

// OverloadError reports an answer meaning "too many requests" that carries
// no usable Retry-After (HTTP 429 or 503 without one). The lane retries it
// with backoff like any failure; under adaptive rate control it also cuts
// the rate. It counts as a failure for the breaker unless Limited: a 429
// is the answer of a downstream that is up and limiting, a 503 of one
// that is unavailable.
type OverloadError struct {
	Err     error
	Limited bool // a 429 (too many requests), not a 503
}

func (e *OverloadError) Error() string { return e.Err.Error() }
func (e *OverloadError) Unwrap() error { return e.Err }

// PermanentError reports a failure that retrying cannot fix (HTTP 4xx).
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return "permanent failure: " + e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Classify is the class of a sink's error, a pushback's wait, and whether
// an overload was a 429 (Limited). A nil error is Succeeded.
func Classify(err error) (c Class, retryAfter time.Duration, limited bool) {
	if err == nil {
		return Succeeded, 0, false
	}
	return classifyErr(err)
}

// classifyErr is Classify for a non-nil err. It is apart so that a
// success allocates nothing: the targets of errors.As escape to the heap.
func classifyErr(err error) (Class, time.Duration, bool) {
	var pb *PushbackError
	var perm *PermanentError
	var ov *OverloadError
	switch {
	case errors.As(err, &pb):
		return PushedBack, max(pb.RetryAfter, 0), false
	case errors.As(err, &perm):
		return Refused, 0, false
	case errors.As(err, &ov):
		return Overloaded, 0, ov.Limited
	}
	return Failed, 0, false
}
