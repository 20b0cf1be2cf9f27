package shaper

import (
	"context"
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
	call    *Call           // nil: one job
	ctx     context.Context // the try's span's (tracing on); nil: the deliveries' own
	started time.Time
}

// runDelivery runs d on a delivery worker.
func runDelivery(d delivery) {
	ctx := d.ctx
	if ctx == nil {
		ctx = d.l.s.deliveries.Context()
	}
	if d.call != nil {
		d.l.deliverCall(ctx, d.sink, d.retry, d.call, d.started)
		return
	}
	d.l.deliver(ctx, d.sink, d.retry, d.job, d.started)
}
