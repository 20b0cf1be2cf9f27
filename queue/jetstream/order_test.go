package jetstream

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaper/queue"
)

// job is a test job: its payload is its name; priority is the producer's
// Shaper-Priority + 1 (0 = none).
func job(name, key string, priority int) *queue.Job {
	return &queue.Job{ID: "j-" + name, Key: key, Priority: priority, Payload: []byte(name), Enqueued: time.Now()}
}

// storeAll stores jobs in order.
func storeAll(t *testing.T, q *Queue, jobs ...*queue.Job) {
	t.Helper()
	for _, j := range jobs {
		if _, err := store(q, j); err != nil {
			t.Fatalf("store %s: %v", j.Payload, err)
		}
	}
}

// waitHeld waits until q's local index holds n jobs.
func waitHeld(t *testing.T, q *Queue, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		q.mu.Lock()
		got := q.hold.index.len()
		q.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the index holds %d jobs, want %d", got, n)
		}
	}
}

// takeN takes n jobs, acking each, and returns their names in order.
func takeN(t *testing.T, q *Queue, n int) []string {
	t.Helper()
	var out []string
	for range n {
		j := takeWithin(q, 10*time.Second)
		if j == nil {
			t.Fatalf("after %v: no job within 10 s", out)
		}
		out = append(out, string(j.Payload))
		q.Ack(j, time.Time{})
	}
	return out
}

// With levels the drainer fetches every job and starts them as the memory
// backend does: the most urgent level first, FIFO within a level, and a
// retry (redelivered after its backoff) ahead of its level's fresh jobs.
func TestIndexLevelsOrder(t *testing.T) {
	t.Parallel()
	st, _ := runStore(t)
	ls := QueueSettings{Name: "api", Capacity: 50, Rate: 1, Concurrency: 10, Priorities: 3}
	q := openQueue(t, st, ls)
	storeAll(t, q, job("o0", "", 0), job("o1", "", 0), job("m0", "", 2), job("u0", "", 1), job("o2", "", 0),
		job("u1", "", 1), job("m1", "", 2))
	startQueue(q, func() {})
	defer q.Stop()
	waitHeld(t, q, 7)
	if got, want := takeN(t, q, 3), []string{"u0", "u1", "m0"}; !slices.Equal(got, want) {
		t.Fatalf("first starts %v, want %v", got, want)
	}
	j := takeWithin(q, time.Second) // m1: its try fails, retried at once
	if string(j.Payload) != "m1" {
		t.Fatalf("fourth start %s, want m1", j.Payload)
	}
	q.RetryLater(j, time.Now(), false)
	waitHeld(t, q, 4) // o0..o2 and m1 again
	got := takeN(t, q, 4)
	if want := []string{"m1", "o0", "o1", "o2"}; !slices.Equal(got, want) {
		t.Fatalf("then %v, want %v (the retry's level first)", got, want)
	}
}

// A retry goes ahead of its own level's fresh jobs, not of a more urgent
// level's, and its failed try still counts.
func TestIndexRetryFirstInLevel(t *testing.T) {
	t.Parallel()
	st, _ := runStore(t)
	q := openQueue(t, st, QueueSettings{Name: "api", Capacity: 50, Rate: 1, Concurrency: 10, Priorities: 2})
	storeAll(t, q, job("o0", "", 0), job("o1", "", 0))
	startQueue(q, func() {})
	defer q.Stop()
	waitHeld(t, q, 2)
	j := takeWithin(q, time.Second)
	q.RetryLater(j, time.Now(), false)
	storeAll(t, q, job("u0", "", 1))
	waitHeld(t, q, 3)
	var order []string
	var failures []int
	for range 3 {
		j := takeWithin(q, time.Second)
		order, failures = append(order, string(j.Payload)), append(failures, j.Failures)
		q.Ack(j, time.Time{})
	}
	if want := []string{"u0", "o0", "o1"}; !slices.Equal(order, want) || failures[1] != 1 {
		t.Fatalf("order %v failures %v, want %v with o0's failed try counted", order, failures, want)
	}
}

// Under fairness the drainer's index is a queue.Fair: keys take turns
// (deficit round robin), FIFO within a key, whatever order they were
// stored in.
func TestIndexFairRoundRobin(t *testing.T) {
	t.Parallel()
	st, _ := runStore(t)
	q := openQueue(t, st, QueueSettings{Name: "api", Capacity: 50, Rate: 1, Concurrency: 10, Fairness: true})
	for i := range 5 {
		storeAll(t, q, job("a"+string(rune('0'+i)), "a", 0))
	}
	storeAll(t, q, job("b0", "b", 0), job("b1", "b", 0), job("e0", "", 0))
	startQueue(q, func() {})
	defer q.Stop()
	waitHeld(t, q, 8)
	got := strings.Join(takeN(t, q, 8), " ")
	if want := "a0 b0 e0 a1 b1 a2 a3 a4"; got != want {
		t.Fatalf("starts %s, want %s", got, want)
	}
}

// A job due within the lead is held until its instant, not holding up a
// ready one stored after it; one due further ahead is handed back to wait
// in the stream, is fetched again before its instant and starts at it,
// its hand-back not counted as a try.
func TestDelaysHeldAndHandedBack(t *testing.T) {
	t.Parallel()
	st, _ := runStore(t)
	q := openQueue(t, st, QueueSettings{Name: "api", Capacity: 50, Rate: 1, Concurrency: 1})
	t0 := time.Now()
	near, far := job("near", "", 0), job("far", "", 0)
	near.NotBefore, far.NotBefore = t0.Add(time.Second+123*time.Microsecond), t0.Add(delayLead+1500*time.Millisecond)
	storeAll(t, q, far, near, job("now", "", 0))
	startQueue(q, func() {})
	defer q.Stop()
	got := map[string]*queue.Job{}
	at := map[string]time.Time{}
	for deadline := time.Now().Add(15 * time.Second); len(got) < 3 && time.Now().Before(deadline); {
		next, ok := q.NextReady()
		if !ok || next.After(time.Now()) {
			time.Sleep(time.Millisecond)
			continue
		}
		if j, _, ok := q.Take(time.Now()); ok {
			got[string(j.Payload)], at[string(j.Payload)] = j, time.Now()
			q.Ack(j, time.Time{})
		}
	}
	if len(got) != 3 {
		t.Fatalf("started %v, want now, near and far", got)
	}
	if d := at["now"].Sub(t0); d > time.Second {
		t.Errorf("the ready job started %s after the stores, want at once", d)
	}
	for _, j := range []*queue.Job{near, far} {
		name := string(j.Payload)
		if at[name].Before(j.NotBefore) || at[name].Sub(j.NotBefore) > 500*time.Millisecond {
			t.Errorf("%s started %s after its instant, want 0..500ms", name, at[name].Sub(j.NotBefore))
		}
		if !got[name].NotBefore.Equal(j.NotBefore) || got[name].Attempt != 0 || got[name].Failures != 0 {
			t.Errorf("%s: instant %s attempt %d failures %d, want its instant to the ns and no tries",
				name, got[name].NotBefore, got[name].Attempt, got[name].Failures)
		}
	}
}

// With one level and a prefetch of one, a retry nak'ed to wait out its
// backoff in the stream is fetched once due although a newer job fills
// the prefetch, and starts ahead of it, its failed try counted.
func TestRetryFetchedPastFullPrefetch(t *testing.T) {
	t.Parallel()
	st, _ := runStore(t)
	q := openQueue(t, st, QueueSettings{Name: "api", Capacity: 50, Rate: 1, Concurrency: 1})
	storeAll(t, q, job("o0", "", 0), job("o1", "", 0), job("o2", "", 0))
	startQueue(q, func() {})
	defer q.Stop()
	waitHeld(t, q, 1)
	j := takeWithin(q, time.Second)
	if string(j.Payload) != "o0" {
		t.Fatalf("first start %s, want o0", j.Payload)
	}
	waitHeld(t, q, 1) // o1 fills the prefetch
	q.RetryLater(j, time.Now().Add(100*time.Millisecond), false)
	waitHeld(t, q, 2) // o0 again, o1 still waiting
	var order []string
	var failures []int
	for range 3 {
		j := takeWithin(q, 10*time.Second)
		if j == nil {
			t.Fatalf("after %v: no job within 10 s", order)
		}
		order, failures = append(order, string(j.Payload)), append(failures, j.Failures)
		q.Ack(j, time.Time{})
	}
	if want := []string{"o0", "o1", "o2"}; !slices.Equal(order, want) || failures[0] != 1 {
		t.Fatalf("order %v failures %v, want %v with o0's failed try counted", order, failures, want)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.hold.retries) != 0 || q.hold.retriesDue != 0 {
		t.Fatalf("%d retries still waiting, %d due, want none once fetched", len(q.hold.retries), q.hold.retriesDue)
	}
}
