package pool_test

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/shaperd/shaper/shaper/pool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func grace(d time.Duration) func() time.Duration { return func() time.Duration { return d } }

// TestStopCancelsPastTheGrace: a task that outlasts the grace sees
// Context cancelled; Stop returns once it has, and no worker is left.
func TestStopCancelsPastTheGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var p *pool.Pool[int]
		var cancelled atomic.Bool
		p = pool.New(func(int) {
			<-p.Context().Done()
			cancelled.Store(true)
		}, grace(5*time.Second), slog.New(slog.DiscardHandler))
		start := time.Now()
		p.Go(1, start)
		if err := p.Stop(); err != nil {
			t.Fatal(err)
		}
		if !cancelled.Load() {
			t.Fatal("the task's context was not cancelled")
		}
		if waited := time.Since(start); waited != 5*time.Second {
			t.Fatalf("Stop took %v, want the grace (5s)", waited)
		}
	})
}

// TestTasksReuseIdleWorkers: tasks one after another run on one worker;
// Stop within the grace cancels nothing.
func TestTasksReuseIdleWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ran atomic.Int64
		p := pool.New(func(int) { ran.Add(1) }, grace(time.Second), slog.New(slog.DiscardHandler))
		for i := range 5 {
			p.Go(i, time.Now())
			synctest.Wait()
			if got := p.Idle(); got != 1 {
				t.Fatalf("after task %d: %d idle workers, want 1", i, got)
			}
		}
		if err := p.Stop(); err != nil {
			t.Fatal(err)
		}
		if ran.Load() != 5 || p.Context().Err() == nil {
			t.Fatalf("ran %d, context %v; want 5 and cancelled after Stop", ran.Load(), p.Context().Err())
		}
	})
}

// TestBoundedRefusesPastMaxAndAfterStop: Go refuses while max tasks run
// and once stopped; Stop waits for the running ones and calls late once
// the grace has passed.
func TestBoundedRefusesPastMaxAndAfterStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var late atomic.Bool
		b := pool.NewBounded(2, grace(time.Second), func() { late.Store(true) })
		for i := range 2 {
			if !b.Go(func() { <-release }) {
				t.Fatalf("task %d refused below max", i)
			}
		}
		if b.Go(func() {}) {
			t.Fatal("a third task ran past max 2")
		}
		go func() { time.Sleep(2 * time.Second); close(release) }()
		if err := b.Stop(); err != nil {
			t.Fatal(err)
		}
		if !late.Load() {
			t.Fatal("late was not called though the tasks outlasted the grace")
		}
		if b.Go(func() {}) {
			t.Fatal("a task ran after Stop")
		}
	})
}
