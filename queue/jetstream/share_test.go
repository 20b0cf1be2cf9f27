package jetstream

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/queue"
)

// SetShare bounds the stream now: a share below what the stream holds
// keeps every job and refuses new ones (the server takes the lower bound
// under discard new), and no share lifts the bound.
func TestSetShareBelowWhatTheStreamHolds(t *testing.T) {
	t.Parallel()
	st, js := runStore(t)
	ls := QueueSettings{Name: "printer", Capacity: 100, Rate: 1, StoreShare: 64 << 10}
	q := openQueue(t, st, ls)
	startQueue(q, func() {})
	defer q.Stop()
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

// A larger bound the server cannot reserve room for (other streams'
// bounds hold it) leaves the stream its old bound, with the rest of the
// update made, and is no error; a smaller one is applied.
func TestUpdateKeepingRoom(t *testing.T) {
	t.Parallel()
	js, _ := natsjs.New(runJetStream(t, 1<<20))
	ctx := context.Background()
	for name, b := range map[string]int64{"HOLDER": 600 << 10, "S": 300 << 10} {
		if _, err := js.CreateStream(ctx, natsjs.StreamConfig{Name: name, Subjects: []string{name}, MaxBytes: b}); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.DiscardHandler)
	upd := natsjs.StreamConfig{Name: "S", Subjects: []string{"S"}, MaxBytes: 600 << 10, MaxMsgs: 7}
	s, err := UpdateKeepingRoom(ctx, js, upd, 300<<10, log, "jobs")
	if err != nil {
		t.Fatalf("a bound with no room for it: %v, want the old one kept", err)
	}
	if c := s.CachedInfo().Config; c.MaxBytes != 300<<10 || c.MaxMsgs != 7 {
		t.Fatalf("max_bytes %d, max_msgs %d; want 307200 kept, 7 applied", c.MaxBytes, c.MaxMsgs)
	}
	upd.MaxBytes = 100 << 10
	if s, err = UpdateKeepingRoom(ctx, js, upd, 300<<10, log, "jobs"); err != nil || s.CachedInfo().Config.MaxBytes != 100<<10 {
		t.Fatalf("a smaller bound: %v, want it applied", err)
	}
}
