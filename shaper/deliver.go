package shaper

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/outcome"
	"github.com/shaperd/shaper/shaper/policy"
)

// deliver runs one try of job on a delivery worker, under ctx (the
// deliveries' context, or a child carrying the try's span), and books the
// outcome.
func (l *lane) deliver(ctx context.Context, sink Sink, retry RetryPolicy, job *queue.Job, started time.Time) {
	fb, err := sink.Deliver(ctx, job)
	endSpan(ctx, err)
	done := time.Now()
	l.m.Duration.Observe(done.Sub(started).Seconds())
	if l.finish(job, fb, err, retry, done) {
		l.s.forget(l)
	}
}

// finish books a try's answer at now: every policy books it (what it said
// of the downstream's limit, fb, included), then the job is dealt with by
// its error: success, kept or dropped at shutdown, pushback, permanent
// failure, or a retry. It reports whether a removed lane is now finished.
func (l *lane) finish(job *queue.Job, fb Feedback, err error, retry RetryPolicy, now time.Time) (gone bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.c.tries++
	l.c.trySeconds += now.Sub(job.Dispatched).Seconds()
	if l.perKey.Finished(job) || l.inflight >= l.limit {
		l.sched.RestartFrom(now) // was at its cap (the lane's or the key's): no catch-up for the time blocked
	}
	l.inflight--
	if fb.Malformed > 0 {
		l.m.BadHeaders.Add(float64(fb.Malformed))
	}
	res := fb.Result
	a := l.answer(job, fb, err)
	evs := l.policies.Finished(now, a)
	for _, ev := range evs {
		l.report(ev, a)
	}
	g := l.gate(now) // a rate the answer changed applies from here
	if a.Class == policy.PushedBack && err != nil && !a.Cancelled {
		l.countPushback(job, err, evs.At(policy.PushbackPaused))
	}
	l.settleTry(job, res, err, a, evs, retry, now)
	l.rescheduleWith(now, g) // what the cases do leaves the policies as g saw them
	return l.idle()
}

// settleTry deals with job after a try answered a (err, the answer res,
// the policies' events evs): success, kept or dropped at shutdown,
// pushback, permanent failure, or a retry. Requires l.mu.
func (l *lane) settleTry(job *queue.Job, res *outcome.Result, err error, a policy.Answer, evs policy.Events, retry RetryPolicy, now time.Time) {
	switch {
	case err == nil:
		l.succeeded(job, res, now)
	case a.Cancelled && l.q.Settler != nil && l.q.Settler.Keep(job):
		// cancelled at shutdown: stays stored, redelivered after a restart
	case a.Cancelled:
		l.drop(job, ReasonShutdown, "delivery cancelled at shutdown: "+err.Error())
	case a.Class == policy.PushedBack:
		l.onPushback(job, err, evs.At(policy.PushbackPaused), now, res)
	case a.Class == policy.Refused:
		l.fail(job, err, res)
	case evs.Has(policy.BreakerProbeFailed): // the probe failed: the breaker reopened
		l.onProbeFailed(job, now, err, res)
	default:
		l.onError(job, err, retry, now, res)
	}
}

// succeeded books job's success. A durable queue holds the store's slot
// to the end of the job's interval (its call's, on a lane with a batch),
// as level() does for the memory queue. The ack waits for the record,
// within settleWithin. Requires l.mu.
func (l *lane) succeeded(job *queue.Job, res *outcome.Result, now time.Time) {
	var ack func()
	if st := l.q.Settler; st != nil {
		at := job.Slot.Add(l.sched.DrainOf(l.slotsOf(job)))
		ack = func() { st.Ack(job, at) }
	}
	l.note(job, outcome.Succeeded, now, told{result: res, settle: ack})
	l.countOutcome(OutcomeSuccess)
}

// slotsOf is the schedule slots job's start took: its cost, or its call's
// MaxJobs on a lane with a batch. Requires l.mu.
func (l *lane) slotsOf(job *queue.Job) int {
	if l.cfg.Batch.On() {
		return l.perCall()
	}
	return queue.JobCost(job)
}

// answer is what the policies book of a try's answer. Requires l.mu.
func (l *lane) answer(job *queue.Job, fb Feedback, err error) policy.Answer {
	a := policy.Answer{Try: policy.Try{Job: job}, Quota: fb.Quota, Inflight: l.inflight,
		Cancelled: l.s.deliveries.Context().Err() != nil, Err: err}
	a.Class, a.RetryAfter, a.Limited = policy.Classify(err)
	return a
}

// onPushback puts job back at the front after the downstream asked to
// wait (paused until until). The try does not count against MaxAttempts;
// the job's deadline bounds the waiting. Requires l.mu.
func (l *lane) onPushback(job *queue.Job, err error, until, now time.Time, res *outcome.Result) {
	if !job.Deadline.IsZero() && until.After(job.Deadline) {
		l.dropWith(job, ReasonExpired, "downstream pushback outlasts max wait: "+err.Error(), res)
		return
	}
	l.q.RetryLater(job, now, true)
	l.note(job, outcome.Retrying, now, told{err: err.Error(), result: res})
}

// countPushback counts and logs a pushback of the try of job (a call's
// first job, on a lane with a batch: one per call). Requires l.mu.
func (l *lane) countPushback(job *queue.Job, err error, until time.Time) {
	var pb *policy.PushbackError
	errors.As(err, &pb)
	l.c.pushbacks++
	l.m.Pushbacks.Inc()
	l.s.log.Info("downstream pushed back; lane paused", "downstream", l.name,
		"job_id", job.ID, "attempt", job.Attempt, "batch_id", job.BatchID(), "until", until, "error", pb.Error())
}

// onProbeFailed puts back the breaker's probe, whose failure reopened the
// breaker. The probe asked on the breaker's behalf whether the downstream
// is back, so, like a pushback, it uses none of its job's attempts: an
// outage of any length exhausts no job, and the job's deadline (max_wait)
// bounds the holding. It goes back as a retry ready now: behind the
// retries that have waited longer, so on a memory queue the next probe is
// another job that failed before the breaker opened, when there is one;
// a durable queue holds it for the next probe (without counting a
// delivery). Requires l.mu.
func (l *lane) onProbeFailed(job *queue.Job, now time.Time, err error, res *outcome.Result) {
	l.q.RetryLater(job, now, true)
	l.note(job, outcome.Retrying, now, told{err: err.Error(), result: res})
}

// onError schedules a retry after backoff, or fails the job once
// MaxAttempts tries have failed. Requires l.mu.
func (l *lane) onError(job *queue.Job, err error, policy RetryPolicy, now time.Time, res *outcome.Result) {
	job.Failures++
	if job.Failures >= policy.MaxAttempts {
		l.fail(job, fmt.Errorf("%d attempts failed, last: %w", job.Failures, err), res)
		return
	}
	wait := backoff(policy, job.Failures)
	at := now.Add(wait)
	if !job.Deadline.IsZero() && at.After(job.Deadline) {
		l.dropWith(job, ReasonExpired, fmt.Sprintf("retry in %s would pass max wait; last error: %v", wait, err), res)
		return
	}
	l.c.retries++
	l.m.Retries.Inc()
	l.q.RetryLater(job, at, false)
	l.note(job, outcome.Retrying, now, told{err: err.Error(), result: res})
	l.s.log.Debug("delivery failed; will retry", "downstream", l.name, "job_id", job.ID,
		"attempt", job.Attempt, "backoff", wait, "error", err.Error())
}

// fail gives job up as failed; the dead-letter publisher books the outcome
// (dead_lettered or failed). Requires l.mu.
func (l *lane) fail(job *queue.Job, err error, res *outcome.Result) {
	l.s.dl.add(l, job, ReasonFailed, err.Error(), true, res)
}

// countOutcome books one delivered{outcome}. Requires l.mu.
func (l *lane) countOutcome(o Outcome) {
	if o == OutcomeSuccess { // every try of a healthy lane: its series reads l.c when scraped
		l.c.succeeded++
		return
	}
	l.c.delivered[o]++
	l.m.Delivered[string(o)].Inc()
}

// backoff returns the wait before the retry that follows the given number
// of failed tries: d = InitialBackoff doubled per earlier failure, capped at
// MaxBackoff, with "equal jitter" — uniformly in [d/2, d]. Equal rather than
// full jitter keeps at least half the backoff, so a struggling downstream
// always gets a real pause, while retries of a burst still spread out.
func backoff(p RetryPolicy, failures int) time.Duration {
	d := p.InitialBackoff
	for i := 1; i < failures && d < p.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.MaxBackoff)
	half := d / 2
	return half + rand.N(d-half+1)
}
