package shaper

import (
	"fmt"
	"time"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/pace"
	"github.com/shaperd/shaper/shaper/predict"
)

// Deadline-aware admission (LaneSettings.RejectWouldExpire): a job whose
// predicted start is past its max wait is rejected at once with
// ReasonWouldExpire, rather than accepted only to be dropped as expired.
//
// The prediction is the leaky bucket's own arithmetic: the lane's next slot
// (no earlier than its policies allow: after a pushback pause or an open
// breaker) plus the queued cost ahead of the job (queue.Intake.Ahead: the
// more urgent levels' and its own level's jobs before it) times the
// interval, no earlier than a delayed job's instant, plus the scheduler's
// lateness budget (pace.CatchUp, 20 ms) as a margin. It ignores jobs that will
// expire ahead of it and retries still to come, so it errs on the side of
// admitting. The holds the policies know ahead (policy.Forecaster: a timed
// pause, the maintenance windows) are counted: the next slot is after the
// pause or the window now is in, and every window that begins before the
// jobs ahead have started holds them for its length. While the lane is
// paused by the admin API until resumed no start is scheduled and nothing
// is predicted: the job is admitted (and may still expire).

// predictStart is when a job with ahead slots of cost before it would
// start; false while no start is scheduled (see scheduled). Requires l.mu.
func (l *lane) predictStart(now time.Time, ahead int) (time.Time, bool) {
	return l.policies.Forecast(later(l.nextStartAt(now), now), l.drainAhead(ahead))
}

// drainAhead is how long the cost ahead of a job takes to start: ahead
// intervals; on a lane with a batch, the whole calls of MaxJobs before
// the job's (the jobs ahead of it in its own call start with it).
// Requires l.mu.
func (l *lane) drainAhead(ahead int) time.Duration {
	n := l.perCall()
	return time.Duration(ahead/n*n) * l.sched.Interval()
}

// checkDeadline rejects job as would_expire when its predicted start passes
// its deadline (now + max wait). Retry-After is the time after which, with
// no new arrivals, the same job would start within its max wait.
// Requires l.mu.
func (l *lane) checkDeadline(now time.Time, job *queue.Job, rc Receipt) (Receipt, bool) {
	wait := cmp0(job.MaxWait, l.cfg.MaxWait)
	if !l.cfg.RejectWouldExpire || wait <= 0 || !l.scheduled(now) {
		return rc, true
	}
	ready := later(now, job.NotBefore) // a delayed job's wait counts from its instant
	start, _ := l.predictStart(now, l.q.Ahead(job, now))
	start = later(start, ready)
	// The scheduler may start a job up to pace.CatchUp after its slot (a late
	// wake-up), and expiry is strict; a job predicted to start within that
	// margin of its deadline is refused too, or it could expire after all.
	late := predict.Late(start, ready, wait, pace.CatchUp)
	if late <= 0 || l.shadowed(ReasonWouldExpire) {
		return rc, true
	}
	return l.s.reject(l, rc, ReasonWouldExpire, late,
		fmt.Errorf("queue %s would start the job in %s, past its max wait of %s; retry later or send a longer Shaper-Max-Wait",
			l.name, start.Sub(now).Round(time.Millisecond), wait)), false
}
