package outbox

import (
	"context"
	"sync"
	"time"

	"github.com/shaperd/shaper/shaper/service"
)

// Pacing of the items the consumer refused.
const (
	RetryFirst = time.Second      // wait after a key's first failed try
	RetryMax   = 30 * time.Second // the doubling stops here
)

// Handler is the consumer of an Outbox's items. Its methods are called by
// the Outbox's goroutine only.
type Handler[T any] interface {
	// Key is the item's key: items of one key are handled in the order
	// they were added.
	Key(it T) string
	// Handle offers the item; it reports whether the item was taken (and
	// is done with). A refused item is offered again later.
	Handle(ctx context.Context, it T) bool
	// Abandon is called for every item left once Stop's grace ran out.
	Abandon(it T)
}

// backlog is one key's items waiting, in order.
type backlog[T any] struct {
	items []T
	fails int       // consecutive failed tries
	next  time.Time // no try before
}

// Outbox queues items for its Handler. Add is safe for concurrent use and
// never blocks; the goroutine Start starts serves the handler. It is a
// service (package service): Stop hands out what is queued within a
// grace, then abandons the rest. Create it with New.
type Outbox[T any] struct {
	h      Handler[T]
	grace  func() time.Duration
	late   func()
	cancel context.CancelFunc // ends the handler's calls once the grace ran out
	done   chan struct{}      // closed when run returned; nil before Start
	mu     sync.Mutex
	items  []T // added, not yet in a backlog
	closed bool
	wake   chan struct{} // cap 1

	// Owned by run.
	backlogs map[string]*backlog[T] // by key
	order    []string               // keys with a backlog, first come first
}

// New returns an empty Outbox that hands its items to h. Stop gives it
// grace() to hand out what is queued; past it, late is called and what is
// left is abandoned.
func New[T any](h Handler[T], grace func() time.Duration, late func()) *Outbox[T] {
	return &Outbox[T]{h: h, grace: grace, late: late, wake: make(chan struct{}, 1), backlogs: map[string]*backlog[T]{}}
}

// Start starts serving the handler; ctx bounds each Handle call until
// Stop's grace runs out.
func (o *Outbox[T]) Start(ctx context.Context) error {
	ctx, o.cancel = context.WithCancel(context.WithoutCancel(ctx))
	o.done = make(chan struct{})
	go func() {
		defer close(o.done)
		o.run(ctx)
	}()
	return nil
}

// Stop hands out everything queued, within the grace; past it the
// handler's calls are cancelled and what is left is abandoned. Add must
// not be called after Stop.
func (o *Outbox[T]) Stop() error {
	if o.done == nil {
		return nil
	}
	o.close()
	service.WaitGrace(o.done, o.grace(), func() {
		o.late()
		o.cancel()
	})
	o.cancel()
	return nil
}

// Add queues it; it never blocks.
func (o *Outbox[T]) Add(it T) {
	o.mu.Lock()
	o.items = append(o.items, it)
	o.mu.Unlock()
	o.signal()
}

func (o *Outbox[T]) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// close makes run return once everything queued is handled, or once its
// ctx is cancelled.
func (o *Outbox[T]) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.signal()
}

// Waiting is how many items wait in the backlogs. Only the Handler may
// call it, from Handle.
func (o *Outbox[T]) Waiting() int {
	n := 0
	for _, b := range o.backlogs {
		n += len(b.items)
	}
	return n
}

// run handles items until close and an empty backlog; ctx bounds each
// Handle call. When ctx is cancelled, what is left is abandoned, and run
// waits for close (abandoning what is added meanwhile).
func (o *Outbox[T]) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		closed := o.collect()
		next, pending := o.flush(ctx)
		if ctx.Err() != nil {
			o.abandon()
			pending = false
		}
		if closed && !pending {
			return
		}
		done := ctx.Done()
		if ctx.Err() != nil {
			done = nil // abandoned; wait for close or more
		}
		var fire <-chan time.Time
		if pending {
			timer.Reset(max(time.Until(next), 0))
			fire = timer.C
		}
		select {
		case <-o.wake:
		case <-done:
		case <-fire:
		}
		timer.Stop()
	}
}

// collect moves added items into their keys' backlogs and reports whether
// close was called.
func (o *Outbox[T]) collect() bool {
	o.mu.Lock()
	items, closed := o.items, o.closed
	o.items = nil
	o.mu.Unlock()
	for _, it := range items {
		k := o.h.Key(it)
		b := o.backlogs[k]
		if b == nil {
			b = &backlog[T]{}
			o.backlogs[k] = b
			o.order = append(o.order, k)
		}
		b.items = append(b.items, it)
	}
	return closed
}

// flush tries every backlog whose time has come, in order, stopping a
// backlog at its first failure. It returns the earliest next try and
// whether anything is left.
func (o *Outbox[T]) flush(ctx context.Context) (next time.Time, pending bool) {
	order := o.order[:0]
	for _, k := range o.order {
		b := o.backlogs[k]
		if !b.next.After(time.Now()) {
			for len(b.items) > 0 && ctx.Err() == nil {
				if !o.h.Handle(ctx, b.items[0]) {
					b.fails++
					b.next = time.Now().Add(Backoff(b.fails))
					break
				}
				b.items, b.fails = b.items[1:], 0
			}
		}
		if len(b.items) == 0 {
			delete(o.backlogs, k)
			continue
		}
		order = append(order, k)
		if !pending || b.next.Before(next) {
			next, pending = b.next, true
		}
	}
	o.order = order
	return next, pending
}

// Backoff is the wait after the given number of consecutive failures:
// RetryFirst, doubling up to RetryMax.
func Backoff(fails int) time.Duration {
	d := RetryFirst
	for i := 1; i < fails && d < RetryMax; i++ {
		d *= 2
	}
	return min(d, RetryMax)
}

// abandon hands every item left to the Handler's Abandon, in order.
func (o *Outbox[T]) abandon() {
	for _, k := range o.order {
		for _, it := range o.backlogs[k].items {
			o.h.Abandon(it)
		}
		delete(o.backlogs, k)
	}
	o.order = o.order[:0]
}
