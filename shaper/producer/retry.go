package producer

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
)

// DefaultMaxRetryWait is the longest SubmitRetry waits between two
// attempts unless MaxRetryWait says otherwise.
const DefaultMaxRetryWait = 30 * time.Second

// firstBackoff is the first wait after a timeout, no responders, or a
// retryable rejection without Retry-After; it doubles with each one.
const firstBackoff = 100 * time.Millisecond

// retrySettings are SubmitRetry's options.
type retrySettings struct {
	maxWait     time.Duration // cap on one wait
	maxAttempts int           // ≤ 0: until the answer is final or ctx ends
	onRetry     func(Retry)
}

var defaultRetry = retrySettings{maxWait: DefaultMaxRetryWait}

// Retry describes a failed attempt SubmitRetry is about to retry.
type Retry struct {
	Attempt int           // the attempt that failed, from 1
	Err     error         // why: a *RejectedError or a transport error
	Wait    time.Duration // how long SubmitRetry waits before the next attempt
}

// MaxRetryWait caps each single wait of SubmitRetry (default 30s). A
// Retry-After above it is not waited out in one go: SubmitRetry retries
// after about d and takes the new answer. It must be positive.
func MaxRetryWait(d time.Duration) Option { return func(j *job) { j.retry.maxWait = d } }

// MaxAttempts bounds SubmitRetry to n attempts in all; n ≤ 0 (the default)
// retries until the answer is final or the context ends.
func MaxAttempts(n int) Option { return func(j *job) { j.retry.maxAttempts = n } }

// OnRetry has SubmitRetry call f before each wait, from the calling
// goroutine, e.g. to log it. f must not block.
func OnRetry(f func(Retry)) Option { return func(j *job) { j.retry.onRetry = f } }

// SubmitRetry is Submit that retries while waiting can help, until the job
// is accepted, the answer is final, MaxAttempts is used up or ctx ends. It
// returns the last Result and error, as Submit does.
//
// It retries rejections for rate_limited, queue_full, unavailable and
// would_expire, waiting out their Retry-After: the wait is Retry-After plus
// up to half of it again at random (never earlier than shaperd said; the
// jitter spreads producers told the same), capped at MaxRetryWait. A
// Retry-After at or above the cap waits with equal jitter below it
// (cap/2 .. cap), then asks again. It retries timeouts (nats.ErrTimeout),
// no responders (nats.ErrNoResponders: no shaperd is up yet, or one is
// restarting) and a retryable rejection without Retry-After with
// exponential backoff: 100ms doubling to MaxRetryWait, with equal jitter.
// Other rejections (unknown_downstream, payload_too_large, bad_request)
// and other errors are returned at once.
//
// Retries are idempotent: when no MsgID option is given, SubmitRetry sets
// a random Nats-Msg-Id, the same on every attempt, so a job that was
// accepted but whose reply was lost comes back as a Duplicate with its
// original JobID instead of being queued twice (within the daemon's
// ingress.dedupe_window, default 2m).
//
// A wait that would end after ctx's deadline is not started: the last
// answer is returned at once. If ctx ends during a wait or during a retried
// request, the error matches both the context's error and the last
// answer's (errors.Is).
func (c *Client) SubmitRetry(ctx context.Context, downstream string, payload []byte, opts ...Option) (Result, error) {
	m, j, err := c.message(downstream, payload, opts)
	if err != nil {
		return Result{}, err
	}
	if j.retry.maxWait <= 0 {
		return Result{}, fmt.Errorf("producer: MaxRetryWait must be positive, got %s", j.retry.maxWait)
	}
	if m.Header.Get(HeaderMsgID) == "" {
		m.Header.Set(HeaderMsgID, rand.Text())
	}
	backoffs := 0
	var last error // the previous attempt's answer, when it was retried
	for attempt := 1; ; attempt++ {
		res, err := c.request(ctx, m)
		if last != nil && err != nil && ctx.Err() != nil {
			return res, fmt.Errorf("producer: retry of %s stopped: %w; last answer: %w", m.Subject, context.Cause(ctx), last)
		}
		last = err
		wait, again := j.retry.next(err, &backoffs, mrand.Float64())
		if !again || attempt == j.retry.maxAttempts || !fits(ctx, wait) {
			return res, err
		}
		if j.retry.onRetry != nil {
			j.retry.onRetry(Retry{Attempt: attempt, Err: err, Wait: wait})
		}
		if werr := sleep(ctx, wait); werr != nil {
			return res, fmt.Errorf("producer: retry of %s stopped: %w; last answer: %w", m.Subject, werr, err)
		}
	}
}

// next returns how long to wait before retrying after err, and whether to
// retry at all. backoffs counts the waits without Retry-After so far; u is
// uniform in [0, 1).
func (s retrySettings) next(err error, backoffs *int, u float64) (time.Duration, bool) {
	var rej *RejectedError
	switch {
	case err == nil:
		return 0, false
	case errors.As(err, &rej):
		if !retryHelps(rej.Reason) {
			return 0, false
		}
		if rej.RetryAfter > 0 {
			return afterWait(rej.RetryAfter, s.maxWait, u), true
		}
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, nats.ErrNoResponders):
	default:
		return 0, false
	}
	d := backoffWait(*backoffs, s.maxWait, u)
	*backoffs++
	return d, true
}

// afterWait is the wait for a Retry-After of ra under cap: ra plus up to
// ra/2 of jitter (never above cap); at or above cap, equal jitter below it.
func afterWait(ra, limit time.Duration, u float64) time.Duration {
	if ra >= limit {
		return limit/2 + time.Duration(u*float64(limit/2))
	}
	return ra + time.Duration(u*float64(min(ra/2, limit-ra)))
}

// backoffWait is the n-th backoff (from 0): firstBackoff·2ⁿ up to cap,
// with equal jitter (half fixed, half random).
func backoffWait(n int, limit time.Duration, u float64) time.Duration {
	d := limit
	if n < 30 && firstBackoff<<n < limit {
		d = firstBackoff << n
	}
	return d/2 + time.Duration(u*float64(d/2))
}

// fits reports whether a wait of d can end before ctx does.
func fits(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	deadline, ok := ctx.Deadline()
	return !ok || time.Until(deadline) > d
}

// sleep waits d or until ctx ends, and returns ctx's error if it ended.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
