package natsout

import (
	"context"
	"errors"
	"fmt"
	"reflect"
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

// Past their room the oldest finished records go, and are counted
// exactly; a queued job's record, written before them all, stays as it
// was however many finished ones come after it.
func TestRoomDiscardsFinishedNeverQueued(t *testing.T) {
	s, js, d, clock := newCountingStore(t)
	const room = 16 << 10
	ensure(t, s, "pay", room, time.Hour)
	waiting := rec("waiting", outcome.Queued)
	put(t, s, time.Hour, waiting)
	const written = 200
	for i := range written {
		r := rec(fmt.Sprintf("j%03d", i), outcome.Succeeded)
		r.Error = strings.Repeat("x", 100)
		// One record a second (of the store's clock): each Put may trim.
		*clock = clock.Add(time.Second)
		put(t, s, time.Hour, rec(r.JobID, outcome.Started), r)
	}
	if got, ok := get(t, s, "pay", "waiting"); !ok || !reflect.DeepEqual(got, waiting) {
		t.Fatalf("the queued job's record: %+v, %v; want %+v as it was put", got, ok, waiting)
	}
	if _, ok := get(t, s, "pay", "j000"); ok {
		t.Error("the oldest finished record is still there past the room")
	}
	if got, ok := get(t, s, "pay", fmt.Sprintf("j%03d", written-1)); !ok || got.State != outcome.Succeeded {
		t.Errorf("the newest finished record: %+v, %v", got, ok)
	}
	state := info(t, js, "SHAPER_OUTCOMES_pay").State
	held := state.Msgs - 1 // all but the queued job's
	calls, n := d.of("pay")
	if calls == 0 || n <= 0 || uint64(n)+held != written {
		t.Fatalf("Discarded called %d times for %d records, %d finished held; want %d written = held + discarded",
			calls, n, held, written)
	}
	if state.Bytes > room {
		t.Fatalf("the records take %d bytes, room %d", state.Bytes, room)
	}
}

// A trim does not overwrite a record of a job not yet ended that
// changed after the trim read it: the newer record stays, and the
// finished records are still counted exactly.
func TestTrimKeepsChangedRecord(t *testing.T) {
	s, js, d, clock := newCountingStore(t)
	const room = 16 << 10
	ensure(t, s, "pay", room, time.Hour)
	other, err := NewStore(s.js.Conn(), Settings{}) // another instance, writing meanwhile
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, time.Hour, rec("waiting", outcome.Queued))
	started := rec("waiting", outcome.Started)
	started.StartedAt = t0.Add(time.Minute)
	s.beforeMove = func() {
		s.beforeMove = nil
		put(t, other, time.Hour, started)
	}
	const written = 200
	for i := range written {
		r := rec(fmt.Sprintf("j%03d", i), outcome.Failed)
		r.Error = strings.Repeat("x", 100)
		*clock = clock.Add(time.Second)
		put(t, s, time.Hour, r)
	}
	if s.beforeMove != nil {
		t.Fatal("no trim moved records")
	}
	if got, ok := get(t, s, "pay", "waiting"); !ok || !reflect.DeepEqual(got, started) {
		t.Fatalf("the job's record: %+v, %v; want its newer one %+v", got, ok, started)
	}
	held := streamMsgs(t, js, "SHAPER_OUTCOMES_pay") - 1
	if _, n := d.of("pay"); n <= 0 || uint64(n)+held != written {
		t.Fatalf("%d discarded, %d finished held; want %d written = held + discarded", n, held, written)
	}
}

// Moving a record read at a sequence that is no longer its subject's
// last is refused, and skipped: the newer record stays.
func TestMoveStaleRecord(t *testing.T) {
	s, js := newStore(t)
	ensure(t, s, "pay", 1<<20, time.Hour)
	put(t, s, time.Hour, rec("a1", outcome.Queued))
	put(t, s, time.Hour, rec("a1", outcome.Started))
	st, err := js.Stream(context.Background(), "SHAPER_OUTCOMES_pay")
	if err != nil {
		t.Fatal(err)
	}
	// The record read at 2 (started) is moved; read at 2 or 1 again,
	// after the move and a newer record, they are gone and skipped.
	stale := []held{{seq: 2, subject: s.Subject("pay", "a1")}}
	below, moved, err := s.move(context.Background(), st, stale, 3)
	if err != nil || below != 3 || moved != 1 {
		t.Fatalf("move of the current record: below %d, moved %d, %v; want 3, 1, nil", below, moved, err)
	}
	put(t, s, time.Hour, rec("a1", outcome.Retrying)) // 4
	stale = append(stale, held{seq: 1, subject: s.Subject("pay", "a1")})
	below, moved, err = s.move(context.Background(), st, stale, 4)
	if err != nil || below != 4 || moved != 0 {
		t.Fatalf("move of stale records: below %d, moved %d, %v; want 4, 0, nil", below, moved, err)
	}
	// Read at 4, changed before the publish: refused.
	f, err := s.republish("SHAPER_OUTCOMES_pay", s.Subject("pay", "a1"), []byte(`{}`), 3)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.Ok():
		t.Fatal("a record published over a newer one expecting the older's sequence was stored")
	case err := <-f.Err():
		if !changed(err) {
			t.Fatalf("publish expecting a stale sequence: %v; want the wrong last sequence", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer to the publish")
	}
	if got, ok := get(t, s, "pay", "a1"); !ok || got.State != outcome.Retrying {
		t.Fatalf("Get a1 = %+v, %v; want the newest, retrying", got, ok)
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
// replaces the job's earlier record: one record per job.
func TestFinishedRecordRightAfterPut(t *testing.T) {
	s, _ := newStore(t)
	ensure(t, s, "pay", 1<<20, time.Hour)
	put(t, s, time.Hour, rec("a1", outcome.Started))
	put(t, s, time.Hour, rec("a1", outcome.Succeeded))
	if got, ok := get(t, s, "pay", "a1"); !ok || got.State != outcome.Succeeded {
		t.Fatalf("Get a1 right after Put = %+v, %v; want succeeded", got, ok)
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

// The streams of the earlier layouts are moved to this one in place,
// and the live records' stream of the two-stream layout is deleted, by
// every instance's Ensure.
func TestEnsureOldLayouts(t *testing.T) {
	for name, subject := range map[string]string{
		"two streams": "shaper.queue-outcomes.pay.done.*",
		"first":       "shaper.queue-outcomes.pay.*",
	} {
		t.Run(name, func(t *testing.T) {
			s, js := newStore(t)
			for stream, subject := range map[string]string{"SHAPER_OUTCOMES_pay": subject,
				"SHAPER_OUTCOMES_LIVE_pay": "shaper.queue-outcomes.pay.live.*"} {
				_, err := js.CreateStream(context.Background(), natsjs.StreamConfig{Name: stream,
					Subjects: []string{subject}, MaxMsgsPerSubject: 1, AllowMsgTTL: true,
					AllowDirect: true, MaxBytes: 1 << 20})
				if err != nil {
					t.Fatal(err)
				}
			}
			other, err := NewStore(s.js.Conn(), Settings{})
			if err != nil {
				t.Fatal(err)
			}
			ensure(t, s, "pay", 1<<20, time.Hour)
			ensure(t, other, "pay", 1<<20, time.Hour)
			ensure(t, s, "pay", 1<<20, time.Hour)
			if got := streamConfig(t, js, "SHAPER_OUTCOMES_pay"); len(got.Subjects) != 1 ||
				got.Subjects[0] != "shaper.queue-outcomes.pay.*" || got.MaxBytes != -1 {
				t.Fatalf("the old stream has subjects %v, max bytes %d after Ensure", got.Subjects, got.MaxBytes)
			}
			if _, err := js.Stream(context.Background(), "SHAPER_OUTCOMES_LIVE_pay"); !errors.Is(err, natsjs.ErrStreamNotFound) {
				t.Fatalf("the live records' stream after Ensure: %v; want it deleted", err)
			}
			put(t, s, time.Hour, rec("a1", outcome.Queued), rec("b2", outcome.Succeeded))
			for _, id := range []string{"a1", "b2"} {
				if _, ok := get(t, s, "pay", id); !ok {
					t.Fatalf("a record put in the updated stream, %s, is not there", id)
				}
			}
		})
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

// A room that records of jobs not yet ended fill is not churned once a
// second: a trim that mostly moved them doubles the wait before the
// next, and one that purged finished records sets it back.
func TestTrimBacksOffWhenLiveRecordsFillTheRoom(t *testing.T) {
	s, _, _, clock := newCountingStore(t)
	const room = 32 << 10
	ensure(t, s, "pay", room, time.Hour)
	var live []outcome.Record
	for i := range 40 { // about 40 KiB of queued jobs' records: past the room
		r := rec(fmt.Sprintf("q%03d", i), outcome.Queued)
		r.Error = strings.Repeat("x", 1000)
		live = append(live, r)
	}
	put(t, s, time.Hour, live...)
	wait := func() time.Duration {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.lane("pay").trimWait
	}
	for i, want := range []time.Duration{2 * time.Second, 4 * time.Second} {
		*clock = clock.Add(wait() + time.Second)
		put(t, s, time.Hour, rec(fmt.Sprintf("f%d", i), outcome.Succeeded))
		if got := wait(); got != want {
			t.Fatalf("after churning trim %d the wait is %s, want %s", i+1, got, want)
		}
	}
	for _, r := range live {
		if _, ok, err := s.Get(context.Background(), "pay", r.JobID); !ok || err != nil {
			t.Fatalf("queued record %s lost: %v", r.JobID, err)
		}
	}
}
