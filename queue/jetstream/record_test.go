package jetstream

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/shaperd/shaper/queue"
)

// store offers job to q and waits for the answer.
func store(q *Queue, job *queue.Job) (int, error) {
	type res struct {
		pos int
		err error
	}
	ch := make(chan res, 1)
	q.enqueue(job, func(pos int, err error) { ch <- res{pos, err} })
	r := <-ch
	return r.pos, r.err
}

// A copy of an id whose job was delivered (acked, gone from the stream) is
// answered duplicate with the original's job id, also by another Store
// (another instance, or this one after a restart); an id whose record is
// older than the window is not a duplicate.
func TestRecordAnswersCopyAfterDelivery(t *testing.T) {
	t.Parallel()
	st, js := runStore(t)
	ls := QueueSettings{Name: "printer", Capacity: 10, Rate: 100}
	ctx := context.Background()
	if err := st.Ensure(ctx, []QueueSettings{ls}); err != nil {
		t.Fatal(err)
	}
	q, _ := st.Queue(ls)
	if _, err := store(q, &queue.Job{ID: "j1", DedupeID: "order-1", Payload: []byte("x"), Enqueued: time.Now()}); err != nil {
		t.Fatal(err)
	}
	startQueue(q, func() {})
	var job *queue.Job
	for deadline := time.Now().Add(5 * time.Second); job == nil; time.Sleep(10 * time.Millisecond) {
		if job, _, _ = q.Take(time.Now()); job == nil && time.Now().After(deadline) {
			t.Fatal("the stored job was not fetched")
		}
	}
	q.Ack(job, time.Time{})
	q.Stop()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		s, _ := js.Stream(ctx, st.StreamName("printer"))
		if info, err := s.Info(ctx); err == nil && info.State.Msgs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the delivered job was not acked")
		}
	}

	other, err := New(st.nc, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	q2, _ := other.Queue(ls)
	again := &queue.Job{ID: "j2", DedupeID: "order-1", Payload: []byte("x"), Enqueued: time.Now()}
	if _, err := store(q2, again); !errors.Is(err, queue.ErrDuplicate) || again.ID != "j1" {
		t.Fatalf("copy after delivery: job id %q, %v; want j1, queue.ErrDuplicate", again.ID, err)
	}

	if err := st.nc.PublishMsg(st.recordMsg("order-0", "j0", time.Now().Add(-DefaultDedupeWindow-time.Second))); err != nil {
		t.Fatal(err)
	}
	_ = st.nc.Flush()
	old := &queue.Job{ID: "j3", DedupeID: "order-0", Payload: []byte("x"), Enqueued: time.Now()}
	if _, err := store(q2, old); err != nil || old.ID != "j3" {
		t.Fatalf("id recorded before the window: job id %q, %v; want stored as j3", old.ID, err)
	}
}

// A copy the stream's duplicate window refuses, whose original is neither
// in the stream nor recorded, is a duplicate without a job id: never the
// id the copy was about to get, which no job has.
func TestDuplicateWithoutOriginalHasNoJobID(t *testing.T) {
	t.Parallel()
	st, js := runStore(t)
	ls := QueueSettings{Name: "printer", Capacity: 10, Rate: 1}
	ctx := context.Background()
	if err := st.Ensure(ctx, []QueueSettings{ls}); err != nil {
		t.Fatal(err)
	}
	m := encode(st.Subject("printer"), &queue.Job{ID: "j1", DedupeID: "order-1", Enqueued: time.Now()})
	pa, err := js.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := js.Stream(ctx, st.StreamName("printer"))
	if err := s.DeleteMsg(ctx, pa.Sequence); err != nil { // as if delivered with its record lost
		t.Fatal(err)
	}
	q, _ := st.Queue(ls)
	again := &queue.Job{ID: "j2", DedupeID: "order-1", Enqueued: time.Now()}
	if _, err := store(q, again); !errors.Is(err, queue.ErrDuplicate) || again.ID != "" {
		t.Fatalf("copy: job id %q, %v; want \"\", queue.ErrDuplicate", again.ID, err)
	}
}

// Stores run in the order they were offered, each once ready.
func TestOrder(t *testing.T) {
	t.Parallel()
	var o order
	var ran []int
	first := o.add(nil)
	o.add(func() { ran = append(ran, 2) })
	third := o.add(nil)
	if len(ran) != 0 {
		t.Fatalf("ran %v before the first was ready", ran)
	}
	o.ready(third, func() { ran = append(ran, 3) })
	o.ready(first, func() { ran = append(ran, 1) })
	o.add(func() { ran = append(ran, 4) })
	if !slices.Equal(ran, []int{1, 2, 3, 4}) {
		t.Fatalf("ran %v, want [1 2 3 4]", ran)
	}
}
