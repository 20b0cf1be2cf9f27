package natsout

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/shaper/outcome"
)

// discards counts what a store reports through Settings.Discarded.
type discards struct {
	mu    sync.Mutex
	calls int
	n     map[string]int
}

func (d *discards) add(ds string, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	d.n[ds] += n
}

func (d *discards) of(ds string) (calls, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls, d.n[ds]
}

// newCountingStore is a store whose discards are counted and whose clock
// the test moves.
func newCountingStore(t *testing.T) (*Store, natsjs.JetStream, *discards, *time.Time) {
	t.Helper()
	nc, js := runNATS(t)
	d := &discards{n: map[string]int{}}
	s, err := NewStore(nc, Settings{Discarded: d.add})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	s.now = func() time.Time { return clock }
	return s, js, d, &clock
}

func info(t *testing.T, js natsjs.JetStream, name string) *natsjs.StreamInfo {
	t.Helper()
	st, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func streamMsgs(t *testing.T, js natsjs.JetStream, name string) uint64 {
	t.Helper()
	return info(t, js, name).State.Msgs
}

// Past their room the oldest finished records go, and are counted; a
// queued job's record stays however many finished ones come after it.
func TestRoomDiscardsFinishedNeverQueued(t *testing.T) {
	s, js, d, clock := newCountingStore(t)
	const room = 16 << 10
	ensure(t, s, "pay", room, time.Hour)
	put(t, s, time.Hour, rec("waiting", outcome.Queued))
	const written = 200
	for i := range written {
		r := rec(fmt.Sprintf("j%03d", i), outcome.Succeeded)
		r.Error = strings.Repeat("x", 100)
		// One record a second (of the store's clock): each Put trims, so
		// the server never reaches the bound and discards on its own.
		*clock = clock.Add(time.Second)
		put(t, s, time.Hour, rec(r.JobID, outcome.Started), r)
	}
	if _, ok := get(t, s, "pay", "waiting"); !ok {
		t.Fatal("the queued job's record went for room")
	}
	if _, ok := get(t, s, "pay", "j000"); ok {
		t.Error("the oldest finished record is still there past the room")
	}
	if got, ok := get(t, s, "pay", fmt.Sprintf("j%03d", written-1)); !ok || got.State != outcome.Succeeded {
		t.Errorf("the newest finished record: %+v, %v", got, ok)
	}
	held := streamMsgs(t, js, "SHAPER_OUTCOMES_pay")
	calls, n := d.of("pay")
	if calls == 0 || n <= 0 || uint64(n)+held != written {
		t.Fatalf("Discarded called %d times for %d records, %d held; want %d written = held + discarded",
			calls, n, held, written)
	}
	if b := info(t, js, "SHAPER_OUTCOMES_pay").State.Bytes; b > room {
		t.Fatalf("the finished records take %d bytes, room %d", b, room)
	}
}

// The finished records' state is read at most once a second per
// downstream, and not at all without a room bound.
func TestTrimOnceASecond(t *testing.T) {
	s, js, d, clock := newCountingStore(t)
	const room = 64 << 10
	ensure(t, s, "pay", room, time.Hour)
	ensure(t, s, "free", 0, time.Hour)
	recs := func(ds string, from, n int) []outcome.Record {
		var rs []outcome.Record
		for i := from; i < from+n; i++ {
			r := rec(fmt.Sprintf("j%03d", i), outcome.Failed)
			r.Downstream, r.Error = ds, strings.Repeat("x", 1000)
			rs = append(rs, r)
		}
		return rs
	}
	put(t, s, time.Hour, recs("pay", 0, 5)...) // the first Put measures: under the room
	per := info(t, js, "SHAPER_OUTCOMES_pay").State.Bytes / 5
	more := int(room/per) - 2 - 5
	put(t, s, time.Hour, recs("pay", 5, more)...) // the same second: not measured again
	before := info(t, js, "SHAPER_OUTCOMES_pay").State
	if calls, _ := d.of("pay"); calls != 0 || float64(before.Bytes) <= trimAbove*room {
		t.Fatalf("within the first second: %d trims, %d bytes of %d held", calls, before.Bytes, room)
	}
	*clock = clock.Add(time.Second)
	put(t, s, time.Hour, recs("pay", 5+more, 1)...)
	calls, n := d.of("pay")
	after := info(t, js, "SHAPER_OUTCOMES_pay").State
	if calls != 1 || n <= 0 || uint64(n) != before.Msgs+1-after.Msgs || float64(after.Bytes) > trimTo*room {
		t.Fatalf("a second later: %d trims of %d records; %d held before and %d (%d bytes) after",
			calls, n, before.Msgs, after.Msgs, after.Bytes)
	}
	put(t, s, time.Hour, recs("free", 0, 2*more)...)
	if _, n := d.of("free"); n != 0 {
		t.Fatalf("a downstream without a room bound was trimmed: %d records", n)
	}
}

func TestExcess(t *testing.T) {
	for _, c := range []struct {
		msgs, bytes uint64
		room        int64
		want        uint64
	}{
		{100, 9000, 10000, 0},   // at 90 %: none
		{100, 9100, 10000, 13},  // ceil((9100-8000) / 91)
		{10, 20000, 10000, 6},   // (20000-8000) / 2000
		{10, 100000, 10000, 10}, // all of them, no more
		{10, 20000, 0, 0},       // no bound
		{0, 0, 10000, 0},
	} {
		if got := excess(c.msgs, c.bytes, c.room); got != c.want {
			t.Errorf("excess(%d msgs, %d bytes, room %d) = %d, want %d", c.msgs, c.bytes, c.room, got, c.want)
		}
	}
}

// A finished job's record is answered from the moment Put returns, and
// the marker that replaced its live record goes soon after.
func TestFinishedRecordRightAfterPut(t *testing.T) {
	s, js := newStore(t)
	ensure(t, s, "pay", 1<<20, time.Hour)
	put(t, s, time.Hour, rec("a1", outcome.Started))
	put(t, s, time.Hour, rec("a1", outcome.Succeeded))
	if got, ok := get(t, s, "pay", "a1"); !ok || got.State != outcome.Succeeded {
		t.Fatalf("Get a1 right after Put = %+v, %v; want succeeded", got, ok)
	}
	deadline := time.Now().Add(15 * time.Second)
	for streamMsgs(t, js, "SHAPER_OUTCOMES_LIVE_pay") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the live marker is still there 15 s after its 1 s TTL")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got, ok := get(t, s, "pay", "a1"); !ok || got.State != outcome.Succeeded {
		t.Fatalf("Get a1 after the marker went = %+v, %v; want succeeded", got, ok)
	}
	if n, err := s.Records(context.Background(), "pay"); err != nil || n != 1 {
		t.Fatalf("Records = %d, %v; want 1", n, err)
	}
}

// A job replayed after it ended is answered queued again, not with the
// final record it had.
func TestReplayedJobAnswersQueued(t *testing.T) {
	s, _ := newStore(t)
	ensure(t, s, "pay", 1<<20, time.Hour)
	put(t, s, time.Hour, rec("a1", outcome.Failed))
	put(t, s, time.Hour, rec("a1", outcome.Queued))
	if got, ok := get(t, s, "pay", "a1"); !ok || got.State != outcome.Queued {
		t.Fatalf("Get of a replayed job = %+v, %v; want queued", got, ok)
	}
}

// A finished records' stream of the earlier layout is moved to the new
// subject in place.
func TestEnsureOldLayout(t *testing.T) {
	s, js := newStore(t)
	_, err := js.CreateStream(context.Background(), natsjs.StreamConfig{Name: "SHAPER_OUTCOMES_pay",
		Subjects: []string{"shaper.queue-outcomes.pay.*"}, MaxMsgsPerSubject: 1, AllowMsgTTL: true,
		AllowDirect: true, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ensure(t, s, "pay", 1<<20, time.Hour)
	ensure(t, s, "pay", 1<<20, time.Hour)
	if got := streamConfig(t, js, "SHAPER_OUTCOMES_pay").Subjects; len(got) != 1 || got[0] != "shaper.queue-outcomes.pay.done.*" {
		t.Fatalf("the old stream's subjects are %v after Ensure", got)
	}
	put(t, s, time.Hour, rec("a1", outcome.Succeeded))
	if _, ok := get(t, s, "pay", "a1"); !ok {
		t.Fatal("a record put in the updated stream is not there")
	}
}

func TestAPIPrefix(t *testing.T) {
	for _, c := range []struct {
		o    natsjs.JetStreamOptions
		want string
	}{
		{natsjs.JetStreamOptions{}, "$JS.API."},
		{natsjs.JetStreamOptions{Domain: "hub"}, "$JS.hub.API."},
		{natsjs.JetStreamOptions{APIPrefix: "$JS.leaf.API"}, "$JS.leaf.API."},
		{natsjs.JetStreamOptions{APIPrefix: "x.API."}, "x.API."},
	} {
		if got := apiPrefix(c.o); got != c.want {
			t.Errorf("apiPrefix(%+v) = %q, want %q", c.o, got, c.want)
		}
	}
}
