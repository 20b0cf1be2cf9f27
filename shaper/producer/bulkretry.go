package producer

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
)

// SubmitBulkRetry is SubmitBulk that sends jobs again while waiting can
// help, until every job is accepted or finally rejected, MaxAttempts
// (requests in all) is used up or ctx ends. It returns the merged answers:
// Jobs[i] is job i's last answer, and Status, Accepted and Rejected count
// them.
//
// After each answer it takes the jobs rejected for rate_limited,
// queue_full, unavailable or would_expire with a Retry-After, waits the
// longest of their Retry-Afters and sends only those jobs again, in their
// order, in one request. One request carries them all, so a job told a
// shorter wait waits longer, never less; the wait is jittered and capped
// by MaxRetryWait as SubmitRetry's is. A job rejected without Retry-After
// or for a reason waiting does not change (bad_request, payload_too_large,
// unknown_downstream) is never sent again. With Atomic the request is sent
// again whole when its failing job has a Retry-After, and not at all when
// a job's rejection is final. A request rejected whole with a Retry-After
// (unavailable, say) is sent again whole; a timeout or no responders backs
// off as in SubmitRetry and sends the same jobs again.
//
// Every job without a MsgID gets a random Nats-Msg-Id, the same on every
// request, so a job that was accepted but whose reply was lost comes back
// as a duplicate with its original JobID instead of being queued twice.
//
// The error is nil when the last request was answered job by job: read
// Rejected and each job's Err. When it was rejected whole or failed, the
// error says so and the BulkResult holds the answers to earlier requests
// (no Jobs if none was answered job by job). A wait that would end after
// ctx's deadline is not started: the last answers are returned at once.
// If ctx ends during a wait or a retried request, the error matches both
// the context's error and the last rejection (errors.Is). OnRetry is called
// before each wait; its Retry.Err counts the jobs sent again and matches
// the rejection whose Retry-After is waited out.
func (c *Client) SubmitBulkRetry(ctx context.Context, downstream string, jobs []BulkJob, opts ...Option) (BulkResult, error) {
	r, err := c.newBulk(downstream, jobs, opts, true)
	if err != nil {
		return BulkResult{}, err
	}
	if r.retry.maxWait <= 0 {
		return BulkResult{}, fmt.Errorf("producer: MaxRetryWait must be positive, got %s", r.retry.maxWait)
	}
	var res BulkResult
	pending := allIndexes(len(jobs))
	backoffs := 0
	var last error // why the previous request was retried
	for attempt := 1; ; attempt++ {
		round, err := c.sendBulk(ctx, r, pending)
		if last != nil && err != nil && ctx.Err() != nil {
			return res, fmt.Errorf("producer: bulk retry of %s stopped: %w; last answer: %w", r.subject, context.Cause(ctx), last)
		}
		res = r.merge(res, round, err, pending)
		p := r.plan(round, err, pending, &backoffs, mrand.Float64())
		if p.next == nil || attempt == r.retry.maxAttempts || !fits(ctx, p.wait) {
			return res, err
		}
		if r.retry.onRetry != nil {
			r.retry.onRetry(Retry{Attempt: attempt, Err: p.why, Wait: p.wait})
		}
		if werr := sleep(ctx, p.wait); werr != nil {
			return res, fmt.Errorf("producer: bulk retry of %s stopped: %w; last answer: %w", r.subject, werr, p.why)
		}
		pending, last = p.next, p.why
	}
}

// merge folds the answer to the jobs pending (round, or err) into res, the
// answers so far, and returns the result.
func (r *bulkRequest) merge(res, round BulkResult, err error, pending []int) BulkResult {
	switch {
	case err != nil && res.Jobs == nil:
		return round // rejected whole (or nothing) before any answer job by job
	case err != nil:
		return res // the jobs keep their last answers
	case len(pending) == len(r.objs):
		return round // every job was sent, in order: the round speaks for all
	}
	for k, jr := range round.Jobs {
		jr.Index = pending[k]
		res.Jobs[jr.Index] = jr
	}
	res.Accepted = 0
	for _, jr := range res.Jobs {
		if jr.Accepted {
			res.Accepted++
		}
	}
	res.Rejected = len(res.Jobs) - res.Accepted
	res.Downstream = orDefault(round.Downstream, res.Downstream)
	switch {
	case res.Rejected == 0:
		res.Status = BulkAccepted
	case res.Accepted == 0:
		res.Status = BulkRejected
	default:
		res.Status = BulkPartial
	}
	return res
}

// bulkPlan is what SubmitBulkRetry does next.
type bulkPlan struct {
	next []int // the jobs to send again, indexes into the caller's jobs; nil: none
	why  error // for Retry.Err
	wait time.Duration
}

// plan decides which of the jobs pending to send again after their
// answer, round or err, and how long to wait first. backoffs counts the
// waits without Retry-After so far; u is uniform in [0, 1).
func (r *bulkRequest) plan(round BulkResult, err error, pending []int, backoffs *int, u float64) bulkPlan {
	var rej *RejectedError
	switch {
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, nats.ErrNoResponders):
		d := backoffWait(*backoffs, r.retry.maxWait, u)
		*backoffs++
		return bulkPlan{next: pending, why: err, wait: d}
	case errors.As(err, &rej):
		if !retryHelps(rej.Reason) || rej.RetryAfter <= 0 {
			return bulkPlan{}
		}
		return bulkPlan{next: pending, why: err, wait: afterWait(rej.RetryAfter, r.retry.maxWait, u)}
	case err != nil:
		return bulkPlan{}
	}
	var next []int
	longest := -1 // the index in round of the longest Retry-After
	for k, jr := range round.Jobs {
		switch {
		case jr.Accepted:
		case retryHelps(jr.Reason) && jr.RetryAfter > 0:
			next = append(next, pending[k])
			if longest < 0 || jr.RetryAfter > round.Jobs[longest].RetryAfter {
				longest = k
			}
		case r.atomic && reasonErrs[jr.Reason] != nil:
			return bulkPlan{} // all or nothing, and this job's rejection is final
		}
	}
	if longest < 0 {
		return bulkPlan{}
	}
	ra := round.Jobs[longest].RetryAfter
	why := fmt.Errorf("producer: %d of %d jobs rejected with Retry-After, the longest %s: %w",
		len(next), len(pending), ra, round.Jobs[longest].Err())
	if r.atomic {
		next = pending
		why = fmt.Errorf("producer: atomic bulk request of %d jobs rejected, sending it again: %w",
			len(pending), round.Jobs[longest].Err())
	}
	return bulkPlan{next: next, why: why, wait: afterWait(ra, r.retry.maxWait, u)}
}

// SubmitBulkRetry is Client.SubmitBulkRetry on a Client with the defaults.
func SubmitBulkRetry(ctx context.Context, nc *nats.Conn, downstream string, jobs []BulkJob, opts ...Option) (BulkResult, error) {
	c, err := New(nc)
	if err != nil {
		return BulkResult{}, err
	}
	return c.SubmitBulkRetry(ctx, downstream, jobs, opts...)
}
