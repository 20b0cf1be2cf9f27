package jetstream

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/queue"
)

func TestParseName(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		id    string
		epoch string
		seq   uint64
		ok    bool
	}{
		{"mbx9zq1k-42", "mbx9zq1k", 42, true},
		{"a-b-7", "a-b", 7, true},
		{"mbx9zq1k-0", "", 0, false},
		{"-42", "", 0, false},
		{"42", "", 0, false},
		{"mbx9zq1k-", "", 0, false},
		{"mbx9zq1k-4x", "", 0, false},
		{"5c0e2c4f0a6b4e0f9d1c2b3a4f5e6d7c", "", 0, false},
	} {
		epoch, seq, ok := parseName(c.id)
		if epoch != c.epoch || seq != c.seq || ok != c.ok {
			t.Errorf("parseName(%q) = %q, %d, %v; want %q, %d, %v", c.id, epoch, seq, ok, c.epoch, c.seq, c.ok)
		}
	}
	if e := epochOf(time.UnixMilli(1_765_000_000_000)); nameOf(e, 12) != e+"-12" || e == "" {
		t.Fatalf("nameOf(%q, 12) = %q", e, nameOf(e, 12))
	}
}

// A job offered without an ID is named by its place in the stream, and the
// name is what the drain reads back, what Find finds while the job is
// stored, and what another Store (another instance, or this one after a
// restart) finds too; a job offered with an ID keeps it and is not found by
// a name. Once delivered the job is no longer found.
func TestJobNamedByItsPlace(t *testing.T) {
	t.Parallel()
	st, js := runStore(t)
	ls := QueueSettings{Name: "printer", Capacity: 10, Rate: 100}
	q := openQueue(t, st, ls)
	ctx := context.Background()
	notBefore := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	named := &queue.Job{Payload: []byte("a"), Enqueued: time.Now(), ReplyTo: "_INBOX.wait", NotBefore: notBefore}
	if _, err := store(q, named); err != nil {
		t.Fatal(err)
	}
	epoch := epochOf(streamCreated(t, js, "SHAPER_printer"))
	if named.ID != epoch+"-1" || !named.Named {
		t.Fatalf("job stored first: id %q named %v, want %q named", named.ID, named.Named, epoch+"-1")
	}
	own := &queue.Job{ID: "own-id", Payload: []byte("b"), Enqueued: time.Now()}
	if _, err := store(q, own); err != nil {
		t.Fatal(err)
	}
	if own.ID != "own-id" || own.Named {
		t.Fatalf("job with its own id: id %q named %v, want own-id, not named", own.ID, own.Named)
	}

	other := runStoreOn(t, st)
	q2 := openQueue(t, other, ls)
	for _, finder := range []*Queue{q, q2} {
		got, ok, err := finder.Find(ctx, named.ID)
		if err != nil || !ok {
			t.Fatalf("Find(%q): ok %v, %v", named.ID, ok, err)
		}
		if got.ID != named.ID || !got.Named || got.ReplyTo != "_INBOX.wait" || !got.NotBefore.Equal(notBefore) ||
			string(got.Payload) != "a" || got.Enqueued.IsZero() {
			t.Fatalf("Find(%q) = %+v, want the job as stored", named.ID, got)
		}
		for _, id := range []string{epoch + "-2", "own-id", epoch + "-9", "0" + epoch + "-1", "nonsense"} {
			if _, ok, err := finder.Find(ctx, id); ok || err != nil {
				t.Fatalf("Find(%q): ok %v, %v; want not found", id, ok, err)
			}
		}
	}

	fresh := &queue.Job{Payload: []byte("c"), Enqueued: time.Now()}
	if _, err := store(q, fresh); err != nil {
		t.Fatal(err)
	}
	startQueue(q, func() {})
	t.Cleanup(func() { _ = q.Stop() })
	var taken *queue.Job
	for taken == nil || taken.ID == "own-id" {
		if taken = takeWithin(q, 10*time.Second); taken == nil {
			t.Fatal("no job taken within 10 s")
		}
		if taken.ID == "own-id" {
			q.Ack(taken, time.Now())
		}
	}
	if taken.ID != fresh.ID || !taken.Named {
		t.Fatalf("taken job: id %q named %v, want %q as named at its store", taken.ID, taken.Named, fresh.ID)
	}
	q.Ack(taken, time.Now())
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, ok, err := q2.Find(ctx, fresh.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivered job %s still found 10 s after its ack", fresh.ID)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A stream created again gives its jobs names of a new epoch: a name of
// the old stream is not found, even at a sequence the new one holds.
func TestNameOfAnEarlierStreamNotFound(t *testing.T) {
	t.Parallel()
	st, js := runStore(t)
	ls := QueueSettings{Name: "printer", Capacity: 10, Rate: 100}
	q := openQueue(t, st, ls)
	first := &queue.Job{Payload: []byte("a"), Enqueued: time.Now()}
	if _, err := store(q, first); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := js.DeleteStream(ctx, "SHAPER_printer"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // a new epoch is a later millisecond
	other := runStoreOn(t, st)
	q2 := openQueue(t, other, ls)
	second := &queue.Job{Payload: []byte("b"), Enqueued: time.Now()}
	if _, err := store(q2, second); err != nil {
		t.Fatal(err)
	}
	if second.ID == first.ID {
		t.Fatalf("the new stream's first job has the old one's name %q", first.ID)
	}
	if _, ok, err := q2.Find(ctx, first.ID); ok || err != nil {
		t.Fatalf("Find(%q) of the deleted stream: ok %v, %v; want not found", first.ID, ok, err)
	}
	if _, ok, err := q2.Find(ctx, second.ID); !ok || err != nil {
		t.Fatalf("Find(%q): ok %v, %v; want found", second.ID, ok, err)
	}
}

// streamCreated is the creation instant of stream name.
func streamCreated(t *testing.T, js natsjs.JetStream, name string) time.Time {
	t.Helper()
	s, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().Created
}

// runStoreOn is a second Store on st's server, on a connection of its
// own: another instance.
func runStoreOn(t *testing.T, st *Store) *Store {
	t.Helper()
	nc, err := nats.Connect(st.nc.ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	other, err := New(nc, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	return other
}

// A copy of a named job's Nats-Msg-Id is answered with the original's
// name: while the job is stored (the stream's duplicate window) and once
// it was delivered (its dedupe record).
func TestDuplicateOfNamedJobGetsItsName(t *testing.T) {
	t.Parallel()
	st, js := runStore(t)
	ls := QueueSettings{Name: "printer", Capacity: 10, Rate: 100}
	q := openQueue(t, st, ls)
	first := &queue.Job{DedupeID: "order-1", Payload: []byte("a"), Enqueued: time.Now()}
	if _, err := store(q, first); err != nil || !first.Named {
		t.Fatalf("first copy: id %q named %v, %v", first.ID, first.Named, err)
	}
	copyOf := func(when string) {
		t.Helper()
		again := &queue.Job{DedupeID: "order-1", Payload: []byte("a"), Enqueued: time.Now()}
		if _, err := store(q, again); !errors.Is(err, queue.ErrDuplicate) || again.ID != first.ID {
			t.Fatalf("copy %s: id %q, %v; want %q, queue.ErrDuplicate", when, again.ID, err, first.ID)
		}
	}
	copyOf("while stored")
	startQueue(q, func() {})
	taken := takeWithin(q, 10*time.Second)
	if taken == nil || taken.ID != first.ID {
		t.Fatalf("taken %+v, want %s", taken, first.ID)
	}
	q.Ack(taken, time.Now())
	q.Stop()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s, _ := js.Stream(context.Background(), st.StreamName("printer"))
		if info, err := s.Info(context.Background()); err == nil && info.State.Msgs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the delivered job was not acked within 10 s")
		}
	}
	copyOf("after delivery")
}
