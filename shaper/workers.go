package shaper

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/shaperd/shaper/queue"
)

// workerIdle is how long a delivery worker waits for another delivery
// before it exits.
const workerIdle = 10 * time.Second

// delivery is one try to run: l.deliver(sink, retry, job, started). A value,
// not a closure, so that handing it to a worker allocates nothing.
type delivery struct {
	l       *lane
	sink    Sink
	retry   RetryPolicy
	job     *queue.Job
	started time.Time
}

// workers runs deliveries on goroutines that outlive one delivery. A
// goroutine per try paid, on every try, for its start, its exit and the
// growth of its stack (the sink's calls, then the policies booking the
// answer); at 10 000 starts a second that was a quarter of the shaper's
// CPU. Go never waits: it hands the delivery to the worker that went idle
// last, or starts a new one, so a blocking sink holds up only its own
// try, and there are never more workers than tries were in flight at the
// peak. The last idle are used first, so the ones a peak left over stay
// idle: Go retires one idle for workerIdle or longer, by the deliveries'
// start times, each time it runs (no timer per worker, nothing when no
// lane starts anything); stop ends them all. It is a service: workers
// start on demand, and Stop lets the deliveries in flight finish within
// the shutdown grace, then cancels ctx, which every delivery runs under.
type workers struct {
	inflight sync.WaitGroup // deliveries running
	all      sync.WaitGroup // worker goroutines
	ctx      context.Context
	cancel   context.CancelFunc
	grace    func() time.Duration
	log      *slog.Logger

	mu      sync.Mutex
	idle    []*worker // the last to go idle at the end
	now     time.Time // start time of the latest delivery
	stopped bool
}

// worker is one delivery goroutine; c hands it its next delivery, or is
// closed to make it exit.
type worker struct {
	c     chan delivery // cap 1: a send never waits
	since time.Time     // workers.now when it went idle; guarded by workers.mu
}

// init readies ws: deliveries run under a context that Stop cancels
// once grace() has passed.
func (ws *workers) init(grace func() time.Duration, log *slog.Logger) {
	ws.ctx, ws.cancel = context.WithCancel(context.Background())
	ws.grace, ws.log = grace, log
}

// Start does nothing: a worker starts with the first delivery it runs.
func (ws *workers) Start(context.Context) error { return nil }

// Stop waits for the deliveries in flight, within the grace, cancels
// their context if they outlast it, and ends every worker.
func (ws *workers) Stop() error {
	grace := ws.grace()
	ws.log.Info("shaper shutting down: finishing in-flight deliveries", "grace", grace)
	waitGrace(waitGroupDone(&ws.inflight), grace, func() {
		ws.log.Warn("in-flight deliveries exceeded the shutdown grace; cancelling them")
		ws.cancel()
	})
	ws.stop()
	ws.cancel()
	return nil
}

// Go runs d on the worker that went idle last, or on a new one. It never
// blocks. Go must not be called after stop.
func (ws *workers) Go(d delivery) {
	ws.inflight.Add(1)
	ws.mu.Lock()
	ws.now = later(ws.now, d.started)
	if len(ws.idle) > 1 && ws.now.Sub(ws.idle[0].since) >= workerIdle {
		close(ws.idle[0].c)
		ws.idle = slices.Delete(ws.idle, 0, 1)
	}
	if n := len(ws.idle); n > 0 {
		w := ws.idle[n-1]
		ws.idle[n-1] = nil
		ws.idle = ws.idle[:n-1]
		ws.mu.Unlock()
		w.c <- d
		return
	}
	ws.mu.Unlock()
	w := &worker{c: make(chan delivery, 1)}
	ws.all.Go(func() { ws.run(w, d) })
}

// Wait waits until no delivery runs.
func (ws *workers) Wait() { ws.inflight.Wait() }

// stop makes every idle worker exit, and every busy one once its delivery
// is done, then waits for them all.
func (ws *workers) stop() {
	ws.mu.Lock()
	ws.stopped = true
	for _, w := range ws.idle {
		close(w.c)
	}
	ws.idle = nil
	ws.mu.Unlock()
	ws.all.Wait()
}

// run runs d, then each delivery handed to w, until w is retired or
// stopped.
func (ws *workers) run(w *worker, d delivery) {
	for ok := true; ok; d, ok = <-w.c {
		d.l.deliver(d.sink, d.retry, d.job, d.started)
		d = delivery{} // hold nothing while idle
		ws.inflight.Done()
		if !ws.park(w) {
			return
		}
	}
}

// park puts w on top of the idle stack; false once stopped.
func (ws *workers) park(w *worker) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.stopped {
		return false
	}
	w.since = ws.now
	ws.idle = append(ws.idle, w)
	return true
}
