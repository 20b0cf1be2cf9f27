// Package pool runs tasks on goroutines that outlive one task: the
// shaper's delivery workers. A goroutine per try paid, on every try, for
// its start, its exit and the growth of its stack (the sink's calls, then
// the policies booking the answer); at 10 000 starts a second that was a
// quarter of the shaper's CPU.
//
// Go never waits: it hands the task to the worker that went idle last, or
// starts a new one, so a blocking task holds up only itself, and there are
// never more workers than tasks were in flight at the peak. The last idle
// are used first, so the ones a peak left over stay idle: Go retires one
// idle for Idle or longer, by the tasks' start times, each time it runs
// (no timer per worker, nothing when nothing starts).
//
// A Pool is a service (package service): workers start on demand, and
// Stop lets the tasks in flight finish within a grace, then cancels
// Context, which every task should run under, and ends every worker.
package pool

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/shaperd/shaper/shaper/service"
)

// Idle is how long a worker waits for another task before it may be
// retired.
const Idle = 10 * time.Second

// Pool runs tasks of type T with its run function. Create it with New.
type Pool[T any] struct {
	run      func(T)
	grace    func() time.Duration
	log      *slog.Logger
	inflight sync.WaitGroup // tasks running
	all      sync.WaitGroup // worker goroutines
	ctx      context.Context
	cancel   context.CancelFunc

	mu      sync.Mutex
	idle    []*worker[T] // the last to go idle at the end
	now     time.Time    // start time of the latest task
	stopped bool
}

// worker is one goroutine; c hands it its next task, or is closed to make
// it exit.
type worker[T any] struct {
	c     chan T    // cap 1: a send never waits
	since time.Time // Pool.now when it went idle; guarded by Pool.mu
}

// New returns a pool that runs each task with run. Stop gives the tasks
// in flight grace() to finish before it cancels Context; log gets one line
// when Stop begins and one if the grace runs out.
func New[T any](run func(T), grace func() time.Duration, log *slog.Logger) *Pool[T] {
	p := &Pool[T]{run: run, grace: grace, log: log}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p
}

// Context is cancelled once Stop's grace has run out: tasks run under it.
func (p *Pool[T]) Context() context.Context { return p.ctx }

// Go runs t, which started at started, on the worker that went idle last,
// or on a new one. It never blocks. Go must not be called after Stop.
func (p *Pool[T]) Go(t T, started time.Time) {
	p.inflight.Add(1)
	p.mu.Lock()
	if started.After(p.now) {
		p.now = started
	}
	if len(p.idle) > 1 && p.now.Sub(p.idle[0].since) >= Idle {
		close(p.idle[0].c)
		p.idle = slices.Delete(p.idle, 0, 1)
	}
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.c <- t
		return
	}
	p.mu.Unlock()
	w := &worker[T]{c: make(chan T, 1)}
	p.all.Go(func() { p.work(w, t) })
}

// Wait waits until no task runs.
func (p *Pool[T]) Wait() { p.inflight.Wait() }

// Idle is how many workers wait for a task.
func (p *Pool[T]) Idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// Start does nothing: a worker starts with the first task it runs.
func (p *Pool[T]) Start(context.Context) error { return nil }

// Stop waits for the tasks in flight, within the grace, cancels Context
// if they outlast it, and ends every worker. Idempotent.
func (p *Pool[T]) Stop() error {
	grace := p.grace()
	p.log.Info("shaper shutting down: finishing in-flight deliveries", "grace", grace)
	done := make(chan struct{})
	go func() { p.inflight.Wait(); close(done) }()
	service.WaitGrace(done, grace, func() {
		p.log.Warn("in-flight deliveries exceeded the shutdown grace; cancelling them")
		p.cancel()
	})
	p.mu.Lock()
	p.stopped = true
	for _, w := range p.idle {
		close(w.c)
	}
	p.idle = nil
	p.mu.Unlock()
	p.all.Wait()
	p.cancel()
	return nil
}

// work runs t, then each task handed to w, until w is retired or
// stopped. While idle it holds no task: the loop variable is overwritten
// only by the next receive, so the last task stays reachable until then;
// a task is a small value (the shaper's holds pointers to the lane and
// job, which outlive it anyway).
func (p *Pool[T]) work(w *worker[T], t T) {
	for ok := true; ok; t, ok = <-w.c {
		p.run(t)
		p.inflight.Done()
		if !p.park(w) {
			return
		}
	}
}

// park puts w on top of the idle stack; false once stopped.
func (p *Pool[T]) park(w *worker[T]) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	w.since = p.now
	p.idle = append(p.idle, w)
	return true
}
