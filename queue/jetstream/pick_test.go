package jetstream

import (
	"testing"
	"time"

	"github.com/shaperd/shaper/queue"
)

// Under a per-key cap the drainer fetches further ahead and hands out the
// first fetched job whose key may start: key a's jobs, first in the
// stream, stay held (in their order) while b's start, and are handed out
// first once a may start again. With the plain prefetch (2 jobs here) a's
// jobs alone would fill it and b's would never be fetched.
func TestPickPassesOverCappedKey(t *testing.T) {
	t.Parallel()
	st, _ := runStore(t)
	ls := QueueSettings{Name: "printer", Capacity: 10, Rate: 100, Concurrency: 2}
	q := openQueue(t, st, ls)
	for _, j := range []struct{ key, id string }{{"a", "a1"}, {"a", "a2"}, {"a", "a3"}, {"b", "b1"}, {"b", "b2"}} {
		done := make(chan error, 1)
		q.enqueue(&queue.Job{ID: j.id, Key: j.key, Payload: []byte(j.id), Enqueued: time.Now()}, func(_ int, err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	q.Configure(queue.Settings{Capacity: 10, KeyConcurrency: 1})
	startQueue(q, func() {})
	defer q.Stop()
	notA := func(k string) bool { return k != "a" }
	var got []string
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("with a capped, took %v within 5 s; want b1 b2", got)
		}
		if j, _, ok := q.TakeIf(time.Now(), notA); ok {
			got = append(got, j.ID)
			continue
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got[0] != "b1" || got[1] != "b2" {
		t.Fatalf("with a capped took %v, want [b1 b2]", got)
	}
	if at, ok := q.NextReadyIf(notA); ok {
		t.Errorf("NextReadyIf with only a's jobs held = %v, want none", at)
	}
	for _, want := range []string{"a1", "a2", "a3"} {
		j, _, ok := q.TakeIf(time.Now(), nil)
		if !ok || j.ID != want {
			t.Fatalf("after a frees: %v %v, want %s (kept its place)", j, ok, want)
		}
	}
}
