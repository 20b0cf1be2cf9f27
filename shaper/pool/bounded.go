package pool

import (
	"context"
	"sync"
	"time"

	"github.com/shaperd/shaper/shaper/service"
)

// Bounded runs at most a fixed number of tasks at once, each on a
// goroutine of its own: the shaper's submissions that wait on a remote
// admission store. It is a service: Stop refuses new tasks and waits for
// the running ones.
type Bounded struct {
	grace func() time.Duration
	late  func()
	sem   chan struct{}
	wg    sync.WaitGroup

	mu     sync.RWMutex // Go's Add under RLock, Stop's close under Lock: no Add races the Wait
	closed bool
}

// NewBounded returns a Bounded of at most max tasks at once. Stop calls
// late once grace() has passed with tasks still running, and goes on
// waiting.
func NewBounded(max int, grace func() time.Duration, late func()) *Bounded {
	return &Bounded{grace: grace, late: late, sem: make(chan struct{}, max)}
}

// Go runs task on a goroutine of its own and reports true; false, running
// nothing, once stopped or while max tasks run. It never blocks.
func (b *Bounded) Go(task func()) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return false
	}
	select {
	case b.sem <- struct{}{}:
	default:
		return false
	}
	b.wg.Go(func() {
		defer func() { <-b.sem }()
		task()
	})
	return true
}

// Start does nothing: a task starts with Go.
func (b *Bounded) Start(context.Context) error { return nil }

// Stop refuses new tasks and waits for the running ones. Idempotent.
func (b *Bounded) Stop() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	service.WaitGrace(done, b.grace(), b.late)
	return nil
}
