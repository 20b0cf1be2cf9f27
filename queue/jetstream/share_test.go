package jetstream

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shaperd/shaper/queue"
)

// SetShare bounds the stream now: a share below what the stream holds
// keeps every job and refuses new ones (the server takes the lower bound
// under discard new), and no share lifts the bound.
func TestSetShareBelowWhatTheStreamHolds(t *testing.T) {
	st, js := runStore(t)
	ls := QueueSettings{Name: "printer", Capacity: 100, Rate: 1, StoreShare: 64 << 10}
	q := openQueue(t, st, ls)
	q.Start(func() {})
	defer q.Close()
	for deadline := time.Now().Add(10 * time.Second); q.Ready() != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("queue not ready: %v", q.Ready())
		}
	}
	payload := bytes.Repeat([]byte("x"), 10<<10)
	for i := range 4 {
		if _, err := store(q, &queue.Job{ID: string(rune('a' + i)), Payload: payload, Enqueued: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	bound := func() (int64, uint64) {
		t.Helper()
		s, err := js.Stream(ctx, st.StreamName("printer"))
		if err != nil {
			t.Fatal(err)
		}
		info := s.CachedInfo()
		return info.Config.MaxBytes, info.State.Msgs
	}

	if err := q.SetShare(ctx, 20<<10); err != nil {
		t.Fatalf("a share below what the stream holds: %v", err)
	}
	if b, n := bound(); b != 20<<10 || n != 4 {
		t.Fatalf("after SetShare(20KiB): max_bytes %d, %d jobs; want 20480, the 4 jobs kept", b, n)
	}
	if _, err := store(q, &queue.Job{ID: "e", Payload: payload, Enqueued: time.Now()}); !errors.Is(err, queue.ErrNoSpace) {
		t.Fatalf("a job past the new share: %v, want ErrNoSpace", err)
	}

	if err := q.SetShare(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if b, n := bound(); b != -1 || n != 4 {
		t.Fatalf("after SetShare(0): max_bytes %d, %d jobs; want -1, 4", b, n)
	}
	if _, err := store(q, &queue.Job{ID: "f", Payload: payload, Enqueued: time.Now()}); err != nil {
		t.Fatalf("a job with no share: %v", err)
	}
}
