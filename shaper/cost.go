package shaper

import (
	"fmt"
	"time"

	"github.com/shaperd/shaper/queue"
)

// A job's cost (the Shaper-Cost header, Job.Cost) makes it count as N jobs:
// N slots of the queue's capacity, N admission tokens and N intervals of
// drain time (the next start is N intervals after its slot). Cost is
// scheduler-side, so it works on every queue backend; a durable store
// bounds its jobs by count, not cost.

// drainOf is the drain time of cost slots at the lane's current rate.
// Requires l.mu.
func (l *lane) drainOf(cost int) time.Duration { return l.sched.DrainOf(cost) }

// checkCost refuses a job whose cost exceeds the lane's MaxCost.
// Requires l.mu.
func (l *lane) checkCost(job *queue.Job, rc Receipt) (Receipt, bool) {
	if c := queue.JobCost(job); c > l.cfg.MaxCost {
		return l.s.reject(l, rc, ReasonBadRequest, 0,
			fmt.Errorf("job cost %d is above queue.max_cost %d of downstream %s", c, l.cfg.MaxCost, l.name)), false
	}
	return rc, true
}
