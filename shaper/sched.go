package shaper

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// catchUp is how much schedule a late scheduler may make up: when it wakes
// after a lane's slot, it starts the lane's jobs for slots no older than
// now-catchUp (SPEC: "may catch up at most ~20 ms of schedule"). Idle time
// is never made up: a lane that could not start (empty, paused, at its
// concurrency cap) restarts its schedule from the moment it could.
const catchUp = 20 * time.Millisecond

// scheduler is a min-heap of lanes by the time each next wants to start,
// served by one goroutine and one time.Timer. Lanes tell it when they want
// to wake (wantAt); the loop pops every lane that is due and lets it start
// what its schedule allows. A heap entry is only a hint: the lane re-checks
// its state under its own lock, so a spurious wake is harmless.
type scheduler struct {
	mu      sync.Mutex
	lanes   laneHeap
	timerAt time.Time     // when the loop will next wake; zero = not armed
	kick    chan struct{} // cap 1: an earlier wake was requested
	due     []*lane       // reused by the loop
}

func newScheduler() *scheduler {
	return &scheduler{kick: make(chan struct{}, 1)}
}

// wantAt schedules l to wake at t, or unschedules it when ok is false.
// Called with l.mu held (lock order: lane.mu, then scheduler.mu).
func (s *scheduler) wantAt(l *lane, t time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !ok:
		if l.idx >= 0 {
			heap.Remove(&s.lanes, l.idx)
		}
		return
	case l.idx >= 0:
		l.wake = t
		heap.Fix(&s.lanes, l.idx)
	default:
		l.wake = t
		heap.Push(&s.lanes, l)
	}
	if s.timerAt.IsZero() || t.Before(s.timerAt) {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// popDue removes and returns the lanes whose wake time is not after now.
func (s *scheduler) popDue(now time.Time) []*lane {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.due = s.due[:0]
	for len(s.lanes) > 0 && !s.lanes[0].wake.After(now) {
		s.due = append(s.due, heap.Pop(&s.lanes).(*lane))
	}
	return s.due
}

// arm records and returns the next wake; ok is false when no lane waits.
func (s *scheduler) arm() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.lanes) == 0 {
		s.timerAt = time.Time{}
		return time.Time{}, false
	}
	s.timerAt = s.lanes[0].wake
	return s.timerAt, true
}

// run is the scheduler goroutine's loop; it returns when ctx is done.
// It reads time.Now (the fake clock inside a synctest bubble) once per
// wake-up and passes it to every lane it runs.
func (s *scheduler) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		for _, l := range s.popDue(now) {
			l.runDue(now)
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

// laneHeap implements heap.Interface ordered by lane.wake; lane.idx tracks
// each lane's position (-1 when absent). Guarded by scheduler.mu.
type laneHeap []*lane

func (h laneHeap) Len() int           { return len(h) }
func (h laneHeap) Less(i, j int) bool { return h[i].wake.Before(h[j].wake) }
func (h laneHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *laneHeap) Push(x any) {
	l := x.(*lane)
	l.idx = len(*h)
	*h = append(*h, l)
}
func (h *laneHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	l.idx = -1
	*h = old[:len(old)-1]
	return l
}
