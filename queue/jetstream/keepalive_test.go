package jetstream

import (
	"context"
	"testing"
	"time"

	"github.com/shaperd/shaper/queue"
)

// A live queue keeps every job it holds (in flight, fetched, ack held)
// alive however long past the ack wait it holds them: the server
// redelivers none of them, so a short ack wait costs a live instance
// nothing.
func TestHeldJobsKeptAlivePastAckWait(t *testing.T) {
	t.Parallel()
	const ackWait = time.Second
	st, js := runStoreWith(t, Settings{AckWait: ackWait})
	ls := QueueSettings{Name: "printer", Capacity: 10, Rate: 100, Concurrency: 2}
	q := openQueue(t, st, ls)
	for _, id := range []string{"a", "b", "c"} {
		done := make(chan error, 1)
		q.enqueue(&queue.Job{ID: id, Payload: []byte(id), Enqueued: time.Now()}, func(_ int, err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	startQueue(q, func() {})
	defer q.Stop()
	var first *queue.Job
	deadline := time.Now().Add(5 * time.Second)
	for first == nil {
		if time.Now().After(deadline) {
			t.Fatal("no job fetched within 5 s")
		}
		first, _, _ = q.Take(time.Now())
		time.Sleep(10 * time.Millisecond)
	}
	q.Ack(first, time.Now().Add(10*ackWait)) // delivered; its ack held past the ack wait
	second, _, ok := q.Take(time.Now())
	if !ok {
		t.Fatal("the second job was not fetched")
	}
	time.Sleep(4 * ackWait) // the second in flight, the third fetched, the first's ack held

	info, err := js.Consumer(context.Background(), st.WindowStream(), st.ConsumerName("printer"))
	if err != nil {
		t.Fatal(err)
	}
	ci, err := info.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after holding 3 jobs for %s (ack wait %s): %d ack pending, %d redelivered", 4*ackWait, ackWait,
		ci.NumAckPending, ci.NumRedelivered)
	if ci.NumRedelivered != 0 || ci.NumAckPending != 3 {
		t.Errorf("consumer has %d redelivered and %d ack pending, want 0 and 3: a held job was let go",
			ci.NumRedelivered, ci.NumAckPending)
	}
	third, _, ok := q.Take(time.Now())
	if !ok || third.ID == first.ID || third.ID == second.ID {
		t.Errorf("third take: %v %v, want the one fetched job not yet taken", third, ok)
	}
	if again, _, ok := q.Take(time.Now()); ok {
		t.Errorf("a fourth job %q was handed out: a held one came back", again.ID)
	}
}

func TestKeepAliveEvery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ ackWait, want time.Duration }{
		{DefaultAckWait, time.Second}, {time.Second, 200 * time.Millisecond}, {100 * time.Millisecond, 100 * time.Millisecond},
	} {
		if got := keepAliveEvery(tc.ackWait); got != tc.want {
			t.Errorf("keepAliveEvery(%s) = %s, want %s", tc.ackWait, got, tc.want)
		}
	}
}
