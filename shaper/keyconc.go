package shaper

import (
	"time"

	"github.com/shaperd/shaper/queue"
)

// Per-key concurrency (Policies.KeyConcurrency): the lane counts tries in
// flight per key (lane.perKey, a policy.KeyFlight) and, under a cap,
// drains through the queue's Picker role, passing over the jobs of a key
// at its cap while other keys' jobs start.

// nextReady is when the lane's next job that may start is ready: under a
// cap, among the jobs whose key is below it. Requires l.mu.
func (l *lane) nextReady() (time.Time, bool) {
	if l.perKey.Max() > 0 && l.q.Picker != nil {
		return l.q.Picker.NextReadyIf(l.perKey.May())
	}
	return l.q.NextReady()
}

// take removes the job to start at now: under a cap, the first in the
// queue's order whose key is below it. Requires l.mu.
func (l *lane) take(now time.Time) (*queue.Job, bool) {
	var (
		job *queue.Job
		ok  bool
	)
	if l.perKey.Max() > 0 && l.q.Picker != nil {
		job, _, ok = l.q.Picker.TakeIf(now, l.perKey.May())
	} else {
		job, _, ok = l.q.Take(now)
	}
	return job, ok
}
