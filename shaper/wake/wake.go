package wake

import (
	"context"
	"math"
	"sync"
	"time"
)

// Item is what a Scheduler runs: RunDue is called by Run's goroutine, with
// the time of the wake-up, once the time the item asked for has come.
type Item interface {
	RunDue(now time.Time)
}

// Handle is an item's place in a Scheduler: where it sits in the heap.
// Its fields are guarded by the Scheduler's lock.
type Handle[T Item] struct {
	item T
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
	items   heap4[T]
	base    time.Time     // the first non-zero time seen: what the heap's keys count from
	timerAt key           // when Run will next wake
	armed   bool          // Run's timer is set for timerAt
	kick    chan struct{} // cap 1: an earlier wake was requested
	due     []*Handle[T]  // reused by Run
}

// key is a time as the heap orders it: nanoseconds since the Scheduler's
// base, by the monotonic clock when both times have its reading (as
// time.Time.Sub measures). Times more than 292 years from the base (the
// zero time among them: the earliest key) saturate at the ends of
// time.Duration: all due at once, or never.
type key int64

// keyOf is t's key, taking t as the base if there is none yet. Requires
// s.mu.
func (s *Scheduler[T]) keyOf(t time.Time) key {
	switch {
	case t.IsZero():
		return math.MinInt64
	case s.base.IsZero():
		s.base = t
	}
	return key(t.Sub(s.base))
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
	if !ok {
		if h.idx >= 0 {
			s.items.remove(h.idx)
		}
		return
	}
	k := s.keyOf(t)
	if h.idx >= 0 {
		s.items.fix(h.idx, k)
	} else {
		s.items.push(h, k)
	}
	if !s.armed || k < s.timerAt {
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
	k := s.keyOf(now)
	for len(s.items) > 0 && s.items[0].at <= k {
		s.due = append(s.due, s.items.pop())
	}
	return s.due
}

// arm records and returns the next wake; ok is false when nothing waits.
func (s *Scheduler[T]) arm() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.items) == 0 {
		s.armed = false
		return time.Time{}, false
	}
	s.timerAt, s.armed = s.items[0].at, true
	return s.base.Add(time.Duration(s.timerAt)), true
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

// heap4 is a min-heap of handles by the time each wants to run, four
// children to a node: 10 000 lanes make a heap of 7 levels, not 14. The
// times sit in the heap's own array, not behind the handles, so that
// sifting compares entries that lie side by side in memory: with the
// handles scattered over a large heap, a comparison through a pointer
// was a cache miss. They are keys, not time.Time values: an entry of 16
// bytes, not 32, so that a node's four children share a cache line, and
// an integer comparison. entry.h.idx tracks each handle's position (-1
// when absent). Guarded by Scheduler.mu.
type heap4[T Item] []entry[T]

type entry[T Item] struct {
	at key
	h  *Handle[T]
}

func (q *heap4[T]) push(h *Handle[T], at key) {
	*q = append(*q, entry[T]{at: at, h: h})
	q.up(len(*q) - 1)
}

// pop removes and returns the earliest handle; q must not be empty.
func (q *heap4[T]) pop() *Handle[T] {
	h := (*q)[0].h
	q.remove(0)
	return h
}

// remove removes the entry at i.
func (q *heap4[T]) remove(i int) {
	old := *q
	n := len(old) - 1
	old[i].h.idx = -1
	if i != n {
		old[i] = old[n]
		old[i].h.idx = i
	}
	old[n] = entry[T]{}
	*q = old[:n]
	if i != n {
		q.fix(i, old[i].at)
	}
}

// fix sets the time of the entry at i to at and restores the order.
func (q heap4[T]) fix(i int, at key) {
	q[i].at = at
	if i > 0 && at < q[(i-1)/4].at {
		q.up(i)
	} else {
		q.down(i)
	}
}

func (q heap4[T]) up(i int) {
	e := q[i]
	for i > 0 {
		p := (i - 1) / 4
		if e.at >= q[p].at {
			break
		}
		q[i] = q[p]
		q[i].h.idx = i
		i = p
	}
	q[i] = e
	e.h.idx = i
}

func (q heap4[T]) down(i int) {
	e := q[i]
	for {
		c := 4*i + 1
		if c >= len(q) {
			break
		}
		m := c // the earliest child
		for j := c + 1; j < min(c+4, len(q)); j++ {
			if q[j].at < q[m].at {
				m = j
			}
		}
		if q[m].at >= e.at {
			break
		}
		q[i] = q[m]
		q[i].h.idx = i
		i = m
	}
	q[i] = e
	e.h.idx = i
}
