package wake

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// Item is what a Scheduler runs: RunDue is called by Run's goroutine, with
// the time of the wake-up, once the time the item asked for has come.
type Item interface {
	RunDue(now time.Time)
}

// Handle is an item's place in a Scheduler: when it wants to run and where
// it sits in the heap. Its fields are guarded by the Scheduler's lock.
type Handle[T Item] struct {
	item T
	at   time.Time
	idx  int // position in the heap; -1 when not scheduled
}

// NewHandle returns item's handle, not scheduled.
func NewHandle[T Item](item T) *Handle[T] {
	return &Handle[T]{item: item, idx: -1}
}

// Scheduler is a min-heap of handles by the time each next wants to run,
// served by Run's goroutine and one time.Timer. The zero value is not
// usable; create it with New. WantAt is safe for concurrent use.
//
// Lock order: a caller may hold its item's own lock when it calls WantAt
// (the shaper's lanes do: lane.mu, then the Scheduler's lock); Run calls
// RunDue without holding the Scheduler's lock.
type Scheduler[T Item] struct {
	mu      sync.Mutex
	items   handles[T]
	timerAt time.Time     // when Run will next wake; zero = not armed
	kick    chan struct{} // cap 1: an earlier wake was requested
	due     []*Handle[T]  // reused by Run
}

// New returns an empty Scheduler.
func New[T Item]() *Scheduler[T] {
	return &Scheduler[T]{kick: make(chan struct{}, 1)}
}

// WantAt schedules h's item to run at t (replacing any earlier want), or
// unschedules it when ok is false. A t in the past runs it at Run's next
// wake-up. It never blocks on Run.
func (s *Scheduler[T]) WantAt(h *Handle[T], t time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !ok:
		if h.idx >= 0 {
			heap.Remove(&s.items, h.idx)
		}
		return
	case h.idx >= 0:
		h.at = t
		heap.Fix(&s.items, h.idx)
	default:
		h.at = t
		heap.Push(&s.items, h)
	}
	if s.timerAt.IsZero() || t.Before(s.timerAt) {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// popDue removes and returns the handles whose time is not after now.
func (s *Scheduler[T]) popDue(now time.Time) []*Handle[T] {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.due = s.due[:0]
	for len(s.items) > 0 && !s.items[0].at.After(now) {
		s.due = append(s.due, heap.Pop(&s.items).(*Handle[T]))
	}
	return s.due
}

// arm records and returns the next wake; ok is false when nothing waits.
func (s *Scheduler[T]) arm() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.items) == 0 {
		s.timerAt = time.Time{}
		return time.Time{}, false
	}
	s.timerAt = s.items[0].at
	return s.timerAt, true
}

// Run runs due items until ctx is done. It reads time.Now (the fake clock
// inside a synctest bubble) once per wake-up and passes it to every item
// it runs. An item is unscheduled before its RunDue is called. Run must be
// called by one goroutine only.
func (s *Scheduler[T]) Run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		for _, h := range s.popDue(now) {
			h.item.RunDue(now)
		}
		if at, ok := s.arm(); ok {
			timer.Reset(time.Until(at))
		} else {
			timer.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-s.kick:
		}
	}
}

// handles implements heap.Interface ordered by Handle.at; Handle.idx
// tracks each handle's position (-1 when absent). Guarded by Scheduler.mu.
type handles[T Item] []*Handle[T]

func (h handles[T]) Len() int           { return len(h) }
func (h handles[T]) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h handles[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *handles[T]) Push(x any) {
	e := x.(*Handle[T])
	e.idx = len(*h)
	*h = append(*h, e)
}
func (h *handles[T]) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.idx = -1
	*h = old[:len(old)-1]
	return e
}
