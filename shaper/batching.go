package shaper

import (
	"context"
	"fmt"
	"time"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/batch"
	"github.com/shaperd/shaper/shaper/outcome"
	"github.com/shaperd/shaper/shaper/pace"
	"github.com/shaperd/shaper/shaper/policy"
)

// A lane with a batch (LaneSettings.Batch) starts calls, each carrying up
// to MaxJobs jobs (their costs counting) and MaxBytes of payload, taken
// in the queue's order. rate and concurrency count calls; the queue's
// capacity and admission count jobs. The schedule counts jobs: each call
// holds MaxJobs of its slots at MaxJobs × rate, so a call starts every
// 1/rate and every prediction made in slots (position, eta, would_expire,
// queue_full's Retry-After) counts calls of MaxJobs.

// perCall is the most jobs one start carries: the batch's MaxJobs, or 1.
// Requires l.mu.
func (l *lane) perCall() int { return l.cfg.Batch.PerCall() }

// setPace makes rate (starts per second) the schedule's drain rate, in
// jobs. Requires l.mu.
func (l *lane) setPace(rate float64) { l.sched.SetRate(rate * float64(l.perCall())) }

// paceRate is the schedule's drain rate in starts (calls) per second.
// Requires l.mu.
func (l *lane) paceRate() float64 { return l.sched.Rate() / float64(l.perCall()) }

// unstartable drops job when it cannot start at now: past its deadline,
// or out of attempts (a durable job tried before a crash). Requires l.mu.
func (l *lane) unstartable(job *queue.Job, now time.Time) bool {
	if l.expired(job, now) {
		return true
	}
	if job.Failures >= l.cfg.Retry.MaxAttempts {
		l.fail(job, fmt.Errorf("%d attempts used (redelivered after the daemon stopped mid-delivery)", job.Failures), nil)
		return true
	}
	return false
}

// carries reports whether a call in the lane's encoding can carry job,
// and fails it for good when not. Intake checked every job against the
// encoding it had then; only a job accepted by the time the lane was created
// (a durable backlog) or its encoding changed is checked again, so that a
// reload to an encoding it does not suit fails it alone rather than
// spoiling its call. Requires l.mu.
func (l *lane) carries(job *queue.Job) bool {
	if job.Enqueued.After(l.recheck) {
		return true
	}
	err := batch.Encoding(l.cfg.Batch.Encoding).Check(job.Payload)
	if err == nil {
		return true
	}
	l.fail(job, &policy.PermanentError{Err: fmt.Errorf("accepted before downstream %s changed its batch encoding: %w", l.name, err)}, nil)
	return false
}

// gather takes the jobs of a call that starts with first, in the queue's
// order, while they fit MaxJobs and MaxBytes; a job that does not fit goes
// back to the front (as a retry due now, which no try used) and starts the
// next call. Each job counts against its key's cap as it is taken, so the
// cap holds within a call. Requires l.mu.
func (l *lane) gather(first *queue.Job, now time.Time) []*queue.Job {
	b := l.cfg.Batch
	l.perKey.Started(first)
	jobs := []*queue.Job{first}
	cost, size := queue.JobCost(first), int64(len(first.Payload))
	for cost < b.MaxJobs && size < b.MaxBytes {
		job, ok := l.take(now)
		if !ok {
			break
		}
		if l.unstartable(job, now) || !l.carries(job) {
			continue
		}
		c, n := queue.JobCost(job), int64(len(job.Payload))
		if cost+c > b.MaxJobs || size+n > b.MaxBytes {
			l.q.RetryLater(job, now, true)
			break
		}
		l.perKey.Started(job)
		jobs = append(jobs, job)
		cost, size = cost+c, size+n
	}
	return jobs
}

// lingering is a lane's call waiting for more jobs (Batch.Linger).
type lingering struct {
	since time.Time // when the call could first have started
	until time.Time // when it starts, full or not: since + Linger, or earlier for a job's deadline
	cost  int       // the queue's cost when it was put back to wait
}

// lingers reports whether the call of jobs waits for more (Batch.Linger):
// it carries less than MaxJobs, its linger since it could first start has
// not run out, and no job of it would start past its deadline for the
// wait. A call that waits goes back to the queue's front, in its order,
// and the lane wakes when it runs out, or sooner when jobs arrive
// (lingerUntil). Requires l.mu.
func (l *lane) lingers(jobs []*queue.Job, now time.Time) bool {
	b := l.cfg.Batch
	cost, size := 0, int64(0)
	for _, job := range jobs {
		cost, size = cost+queue.JobCost(job), size+int64(len(job.Payload))
	}
	if b.Linger <= 0 || cost >= b.MaxJobs || size >= b.MaxBytes {
		return false
	}
	if l.linger.since.IsZero() {
		l.linger.since = now
	}
	until := l.linger.since.Add(b.Linger)
	for _, job := range jobs {
		if !job.Deadline.IsZero() {
			until = earlier(until, job.Deadline.Add(-pace.CatchUp)) // started before it, scheduler lag included
		}
	}
	if !now.Before(until) {
		return false
	}
	for _, job := range jobs {
		l.perKey.Finished(job)
		l.q.RetryLater(job, now, true)
	}
	l.linger.until, l.linger.cost = until, l.q.Cost()
	return true
}

// lingerUntil is when a lane whose next start is due at at wakes: at, or
// the end of a call's linger while no job arrived since it began to wait.
// Requires l.mu.
func (l *lane) lingerUntil(at time.Time) time.Time {
	if l.linger.until.After(at) && l.q.Cost() <= l.linger.cost {
		return l.linger.until
	}
	return at
}

// startCall launches one call carrying jobs on a delivery worker; slot is
// the schedule position it takes: MaxJobs slots, whatever it carries.
// Requires l.mu.
func (l *lane) startCall(jobs []*queue.Job, slot, now time.Time) {
	l.linger = lingering{}
	l.sched.Start(slot, l.perCall())
	l.inflight++
	c := &Call{ID: newJobID(), Jobs: jobs, Encoding: batch.Encoding(l.cfg.Batch.Encoding)}
	l.policies.Started(now, policy.Try{Job: jobs[0]})
	for _, job := range jobs {
		job.Attempt++
		job.Slot, job.Dispatched, job.Batch = slot, now, &c.ID
		l.note(job, outcome.Started, now, told{})
		l.c.started++
		if job.Attempt == 1 {
			l.m.Wait.Observe(now.Sub(later(job.Enqueued, job.NotBefore)).Seconds())
		}
	}
	l.m.CallStarted(len(jobs))
	l.c.calls++
	l.c.callJobs += uint64(len(jobs))
	l.s.deliveries.Go(delivery{l: l, sink: l.sink, retry: l.cfg.Retry, call: c, ctx: l.traceStart(now, jobs[0], c), started: now}, now)
}

// deliverCall runs one call on a delivery worker and books its answer.
func (l *lane) deliverCall(ctx context.Context, sink Sink, retry RetryPolicy, c *Call, started time.Time) {
	fb, err := sink.DeliverBatch(ctx, *c)
	endSpan(ctx, err)
	done := time.Now()
	l.m.Duration.Observe(done.Sub(started).Seconds())
	if l.finishCall(c, fb, err, retry, done) {
		l.s.forget(l)
	}
}

// Outcomes of a call (shaper_batches_total{outcome}).
const (
	BatchSuccess  = "success"   // every job succeeded
	BatchPartial  = "partial"   // a 2xx answer named failed jobs
	BatchPushback = "pushback"  // 429/503 with a wait: every job waits, no attempt used
	BatchRetry    = "retry"     // 5xx, a timeout, no connection: every job retried
	BatchFailed   = "failed"    // other 4xx: every job failed for good
	BatchShutdown = "cancelled" // cut off at shutdown
)

// finishCall books a call's answer at now: the policies book it once (the
// breaker counts one failure per call), then each job is dealt with as
// its own try: the answer's per-job failures, or the call's error for
// every job. It reports whether a removed lane is now finished.
func (l *lane) finishCall(c *Call, fb Feedback, err error, retry RetryPolicy, now time.Time) (gone bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.c.tries++
	l.c.trySeconds += now.Sub(c.Jobs[0].Dispatched).Seconds()
	capped := l.inflight >= l.limit
	for _, job := range c.Jobs {
		if l.perKey.Finished(job) {
			capped = true
		}
	}
	if capped {
		l.sched.RestartFrom(now) // no catch-up for the time blocked
	}
	l.inflight--
	if fb.Malformed > 0 {
		l.m.BadHeaders.Add(float64(fb.Malformed))
	}
	a := l.answer(c.Jobs[0], fb, err)
	evs := l.policies.Finished(now, a)
	for _, ev := range evs {
		l.report(ev, a)
	}
	g := l.gate(now)
	var o string
	switch {
	case err == nil:
		o = l.callAnswered(c, fb, retry, now)
	case a.Cancelled:
		o = BatchShutdown
	case a.Class == policy.PushedBack:
		o = BatchPushback
	case a.Class == policy.Refused:
		o = BatchFailed
	default:
		o = BatchRetry
	}
	if err != nil {
		if o == BatchPushback {
			l.countPushback(c.Jobs[0], err, evs.At(policy.PushbackPaused))
		}
		for _, job := range c.Jobs {
			l.settleTry(job, fb.Result, err, a, evs, retry, now)
		}
	}
	l.m.CallEnded(o)
	l.rescheduleWith(now, g)
	return l.idle()
}

// callAnswered deals with each job of a call the downstream answered 2xx:
// the jobs fb.Failed names failed (retried, or failed for good with
// retry false), the rest succeeded. It returns the call's outcome.
// Requires l.mu.
func (l *lane) callAnswered(c *Call, fb Feedback, retry RetryPolicy, now time.Time) string {
	o := BatchSuccess
	for _, job := range c.Jobs {
		f, failed := fb.Failed[job.ID]
		if !failed {
			l.succeeded(job, fb.Result, now)
			continue
		}
		o = BatchPartial
		err := fmt.Errorf("batch %s: the downstream named job %s failed: %s", c.ID, job.ID, f.Error)
		if !f.Retry {
			l.fail(job, &policy.PermanentError{Err: fmt.Errorf("%w (retry false)", err)}, fb.Result)
			continue
		}
		l.onError(job, err, retry, now, fb.Result)
	}
	return o
}
