package shaper

import (
	"fmt"
	"time"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/settings"
)

// Priorities and delays (Policies.Priorities, Policies.MaxDelay): the
// queue orders the jobs (most urgent ready level first; a delayed job
// joins its level once due), and the lane's schedule paces whatever the
// queue offers as ready, so jobs that become due together start one slot
// apart like any others. The lane checks a job's priority and delay
// against its settings at intake, and counts a delayed job's max wait, ETA
// and wait metric from its instant.

// checkSchedule refuses, as bad_request, a job whose priority level is
// past the lane's levels, or whose delay is beyond its max delay.
// Requires l.mu.
func (l *lane) checkSchedule(now time.Time, job *queue.Job, rc Receipt) (Receipt, bool) {
	if k := max(l.cfg.Priorities, 1); job.Priority > k {
		valid := fmt.Sprintf("so 0..%d are valid (0 is the most urgent)", k-1)
		if k == 1 {
			valid = "so only 0 is valid (or none)"
		}
		return l.s.reject(l, rc, ReasonBadRequest, 0,
			fmt.Errorf("priority %d is out of range: downstream %q has queue.priorities %d, %s",
				job.Priority-1, l.name, k, valid)), false
	}
	d := job.NotBefore.Sub(now)
	switch {
	case d <= 0:
		return rc, true
	case d > cmp0(l.cfg.MaxDelay, settings.DefaultMaxDelay):
		return l.s.reject(l, rc, ReasonBadRequest, 0,
			fmt.Errorf("the job is delayed %s, beyond downstream %q's queue.max_delay %s",
				d.Round(time.Millisecond), l.name, cmp0(l.cfg.MaxDelay, settings.DefaultMaxDelay))), false
	}
	return rc, true
}

// nextFreeAt is when the lane's next start can be at the earliest: its
// next slot (no earlier than its policies allow), and no earlier than the
// queue's first ready job (a queue holding only delayed jobs frees no room
// before the first is due). Requires l.mu.
func (l *lane) nextFreeAt(now time.Time) time.Time {
	t := l.nextStartAt(now)
	if ready, ok := l.q.NextReady(); ok {
		t = later(t, ready)
	}
	return t
}
