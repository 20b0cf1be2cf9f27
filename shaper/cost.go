package shaper

import (
	"fmt"
	"time"
)

// A job's cost (the Shaper-Cost header, Job.Cost) makes it count as N jobs:
// N slots of the queue's capacity, N admission tokens and N intervals of
// drain time (the next start is N intervals after its slot). Cost is
// scheduler-side, so it works on every queue backend; a durable store
// bounds its jobs by count, not cost.

// jobCost is job's cost in slots: Job.Cost, at least 1.
func jobCost(j *Job) int { return max(j.Cost, 1) }

// costed is implemented by queues that know the total cost of their jobs
// (the memory queues); other queues count each job as 1.
type costed interface {
	// CostLen is the sum of the held jobs' costs.
	CostLen() int
}

// queuedCost is the total cost held by q.
func queuedCost(q Queue) int {
	if c, ok := q.(costed); ok {
		return c.CostLen()
	}
	return q.Len()
}

// drainOf is the drain time of cost slots at the lane's current rate.
// Requires l.mu.
func (l *lane) drainOf(cost int) time.Duration {
	return time.Duration(max(cost, 1)) * l.interval
}

// checkCost refuses a job whose cost exceeds the lane's MaxCost.
// Requires l.mu.
func (l *lane) checkCost(job *Job, rc Receipt) (Receipt, bool) {
	if c := jobCost(job); c > l.cfg.MaxCost {
		return l.s.reject(l, rc, ReasonBadRequest, 0,
			fmt.Errorf("job cost %d is above queue.max_cost %d of downstream %s", c, l.cfg.MaxCost, l.name)), false
	}
	return rc, true
}
