package shaper

import (
	"time"

	"github.com/shaperd/shaper/queue"
)

// delivery is one try to run: l.deliver(sink, retry, job, started), or
// one call of several jobs (l.deliverCall). A value, not a closure, so
// that handing it to a worker (package pool) allocates nothing.
type delivery struct {
	l       *lane
	sink    Sink
	retry   RetryPolicy
	job     *queue.Job
	call    *Call // nil: one job
	started time.Time
}

// runDelivery runs d on a delivery worker.
func runDelivery(d delivery) {
	if d.call != nil {
		d.l.deliverCall(d.sink, d.retry, d.call, d.started)
		return
	}
	d.l.deliver(d.sink, d.retry, d.job, d.started)
}
