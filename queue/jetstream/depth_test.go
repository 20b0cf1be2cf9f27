package jetstream

import (
	"context"
	"testing"
	"time"

	"github.com/shaperd/shaper/queue"
)

// A PubAck handled after a refresh whose StreamInfo already counted its
// message is not counted again: that double count is how a full stream of
// 200 read 201. The stores go straight to the stream (as another
// instance's, or ours whose PubAck is still on its way would), then the
// late PubAck is booked as onAck books it.
func TestDepthPubAckAfterRefresh(t *testing.T) {
	t.Parallel()
	st, js := runStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ls := QueueSettings{Name: "printer", Capacity: 2, Rate: 1}
	if err := st.Ensure(ctx, []QueueSettings{ls}); err != nil {
		t.Fatal(err)
	}
	q, err := st.Queue(ls)
	if err != nil {
		t.Fatal(err)
	}
	var lastLog time.Time
	q.ensure(ctx, ls.bounds(), &lastLog)
	s := q.streamHandle()
	if s == nil {
		t.Fatal("ensure did not open the stream")
	}
	publish := func(id string) uint64 {
		t.Helper()
		pa, err := js.Publish(ctx, q.subject, []byte(id))
		if err != nil {
			t.Fatalf("publish %s: %v", id, err)
		}
		return pa.Sequence
	}

	seqA, seqB := publish("a"), publish("b") // the stream is full: 2 of 2
	q.refresh(ctx, s)
	q.stored(seqA, &queue.Job{}, q.subject) // late PubAcks of messages the refresh counted
	q.stored(seqB, &queue.Job{}, q.subject)
	if got := q.Len(); got != 2 {
		t.Fatalf("Len = %d after a refresh counted 2 and their late PubAcks, want 2 (capacity 2)", got)
	}
	if _, err := js.Publish(ctx, q.subject, []byte("c")); err == nil {
		t.Fatal("a third message was stored in a stream of max_msgs 2")
	}

	// A message stored after the refresh is new.
	if err := s.DeleteMsg(ctx, seqA); err != nil {
		t.Fatal(err)
	}
	q.mu.Lock()
	q.cnt.depth.remove() // as the ack of a would
	q.mu.Unlock()
	q.stored(publish("d"), &queue.Job{}, q.subject)
	if got := q.Len(); got != 2 {
		t.Fatalf("Len = %d after one removed and one stored past the refresh, want 2", got)
	}
	q.refresh(ctx, s)
	if got := q.Len(); got != 2 {
		t.Fatalf("Len = %d after the next refresh, want 2", got)
	}
}

// Stores and removals booked while a StreamInfo request is in flight are
// applied on top of its answer by stream sequence.
func TestDepthBookDuringRefresh(t *testing.T) {
	t.Parallel()
	var b depthBook
	b.begin()
	if b.end(3, 10); b.n != 3 {
		t.Fatalf("first refresh: n = %d, want 3", b.n)
	}
	b.stored(11) // after the refresh: new
	if b.n != 4 {
		t.Fatalf("a store past LastSeq: n = %d, want 4", b.n)
	}

	b.begin()
	b.stored(12) // its PubAck came during the request: in the answer (LastSeq 12)
	b.stored(13) // stored after the answer was made (LastSeq 12)
	b.remove()   // an ack sent during the request: not yet in the answer
	if b.end(5, 12); b.n != 5 {
		t.Fatalf("refresh answering 5 (LastSeq 12) with a later store and an ack meanwhile: n = %d, want 5+1-1 = 5", b.n)
	}
	b.stored(9) // a late PubAck at or below LastSeq: counted already
	if b.n != 5 {
		t.Fatalf("a PubAck at or below LastSeq: n = %d, want 5", b.n)
	}
	b.stored(14)
	if b.n != 6 {
		t.Fatalf("a PubAck past LastSeq: n = %d, want 6", b.n)
	}

	b.begin()
	b.abort() // a refresh that failed leaves the count alone
	if b.n != 6 || b.inFlight {
		t.Fatalf("after abort: n = %d, in flight %v", b.n, b.inFlight)
	}
	for range 10 {
		b.remove()
	}
	if b.n != 0 {
		t.Fatalf("n = %d after more removals than messages, want 0", b.n)
	}
}
