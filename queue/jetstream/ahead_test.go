package jetstream

import (
	"testing"
	"time"
)

// A reply's position counts only the jobs that start before the job, as
// the memory backend's does: not the jobs started already (in flight, or
// their ack held to the end of their slot), nor, for a job with no delay,
// the delayed jobs (held until due, or waiting in the stream, counted by
// their tokens in the window). A delayed job's count is an upper bound.
// With levels and without.
func TestAheadSkipsStartedAndDelayed(t *testing.T) {
	t.Parallel()
	for _, levels := range []int{1, 3} {
		st, _ := runStore(t)
		q := openQueue(t, st, QueueSettings{Name: "api", Capacity: 20, Rate: 1, Concurrency: 2, Priorities: levels})
		hour, near := job("hour", "", 0), job("near", "", 0)
		hour.NotBefore, near.NotBefore = time.Now().Add(time.Hour), time.Now().Add(time.Minute)
		storeAll(t, q, hour, near, job("a", "", 0), job("b", "", 0))
		startQueue(q, func() {})
		started := takeWithin(q, 10*time.Second)
		if started == nil || string(started.Payload) != "a" {
			q.Stop()
			t.Fatalf("levels %d: took %v, want a", levels, started)
		}
		q.Ack(started, time.Now().Add(time.Minute)) // its ack held, as for a start in its slot
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			q.mu.Lock()
			waiting := 0
			for _, c := range q.cnt.delayed {
				waiting += c
			}
			q.mu.Unlock()
			if waiting == 2 {
				break
			}
			if time.Now().After(deadline) {
				q.Stop()
				t.Fatalf("levels %d: %d delayed jobs waiting in the window, want 2", levels, waiting)
			}
		}
		if got := q.Ahead(job("x", "", 0), time.Now()); got != 1 {
			t.Errorf("levels %d: ahead of a new job: %d, want 1 (b)", levels, got)
		}
		pos, err := store(q, job("c", "", 0))
		if err != nil || pos != 2 {
			t.Errorf("levels %d: position of a new job %d (%v), want 2 (after b)", levels, pos, err)
		}
		late := job("late", "", 0)
		late.NotBefore = time.Now().Add(2 * time.Minute)
		// A delayed job's count keeps the jobs handed back to wait, due
		// before or after it: an upper bound (hour is counted).
		if got := q.Ahead(late, time.Now()); got != 4 {
			t.Errorf("levels %d: ahead of a job due in 2 min: %d, want 4 (b, c, near, and hour: an upper bound)", levels, got)
		}
		q.Stop()
	}
}
