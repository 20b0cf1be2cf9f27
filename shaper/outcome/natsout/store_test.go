package natsout

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/shaper/outcome"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func newStore(t *testing.T) (*Store, natsjs.JetStream) {
	t.Helper()
	nc, js := runNATS(t)
	s, err := NewStore(nc, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	return s, js
}

func ensure(t *testing.T, s *Store, ds string, room int64, keep time.Duration) {
	t.Helper()
	if err := s.Ensure(context.Background(), ds, room, keep); err != nil {
		t.Fatal(err)
	}
}

func put(t *testing.T, s *Store, keep time.Duration, recs ...outcome.Record) {
	t.Helper()
	es := make([]outcome.Entry, len(recs))
	for i, r := range recs {
		es[i] = outcome.Entry{Record: r, Keep: keep}
	}
	if err := s.Put(context.Background(), es); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, s *Store, ds, id string) (outcome.Record, bool) {
	t.Helper()
	rec, ok, err := s.Get(context.Background(), ds, id)
	if err != nil {
		t.Fatalf("Get %s/%s: %v", ds, id, err)
	}
	return rec, ok
}

func rec(id string, st outcome.State) outcome.Record {
	return outcome.Record{JobID: id, Downstream: "pay", State: st, Attempts: 1, AcceptedAt: t0}
}

// A record comes back as it was put; a later one replaces it; the
// streams are laid out as the package doc says.
func TestPutGet(t *testing.T) {
	s, js := newStore(t)
	ensure(t, s, "pay", 1<<20, time.Hour)
	for name, want := range map[string]struct {
		subject string
		bytes   int64
	}{
		"SHAPER_OUTCOMES_pay":      {"shaper.queue-outcomes.pay.done.*", 1 << 20},
		"SHAPER_OUTCOMES_LIVE_pay": {"shaper.queue-outcomes.pay.live.*", -1},
	} {
		cfg := streamConfig(t, js, name)
		if len(cfg.Subjects) != 1 || cfg.Subjects[0] != want.subject || cfg.MaxMsgsPerSubject != 1 || !cfg.AllowMsgTTL ||
			!cfg.AllowDirect || cfg.Storage != natsjs.FileStorage || cfg.Discard != natsjs.DiscardOld ||
			cfg.MaxBytes != want.bytes || cfg.Retention != natsjs.LimitsPolicy {
			t.Fatalf("stream %s config %+v; want subject %s, max bytes %d", name, cfg, want.subject, want.bytes)
		}
	}
	queued := rec("a1", outcome.Queued)
	done := rec("a1", outcome.Succeeded)
	done.Attempts, done.StartedAt, done.EndedAt = 2, t0.Add(time.Second), t0.Add(2*time.Second)
	done.Result = &outcome.Result{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"},
		Body: []byte(`{"ok":true}`), Bytes: 11}
	put(t, s, time.Hour, queued, rec("b2", outcome.Delayed))
	if got, ok := get(t, s, "pay", "a1"); !ok || !reflect.DeepEqual(got, queued) {
		t.Fatalf("Get a1 = %+v, %v; want %+v", got, ok, queued)
	}
	put(t, s, time.Hour, done)
	if got, ok := get(t, s, "pay", "a1"); !ok || !reflect.DeepEqual(got, done) {
		t.Fatalf("Get a1 = %+v, %v; want %+v", got, ok, done)
	}
	// a1's finished record and its live marker, b2's live record.
	if n, err := s.Records(context.Background(), "pay"); err != nil || n != 3 {
		t.Fatalf("Records = %d, %v; want 3 (a later record replaces the earlier)", n, err)
	}
	for _, c := range []struct{ ds, id string }{{"pay", "nope"}, {"nowhere", "a1"}, {"pay", "a.b"}, {"pay", "*"}} {
		if got, ok := get(t, s, c.ds, c.id); ok {
			t.Errorf("Get %s/%s = %+v, want none", c.ds, c.id, got)
		}
	}
}

// A final record carries its keep as its TTL and goes after it; a
// record of a job not yet ended has no TTL and stays.
func TestFinalRecordExpires(t *testing.T) {
	s, js := newStore(t)
	ensure(t, s, "pay", 0, time.Second)
	put(t, s, 1500*time.Millisecond, rec("waiting", outcome.Queued), rec("done", outcome.Queued))
	put(t, s, 1500*time.Millisecond, rec("done", outcome.Failed))
	for _, c := range []struct{ stream, subject, ttl string }{
		{"SHAPER_OUTCOMES_pay", s.DoneSubject("pay", "done"), "2s"},
		{"SHAPER_OUTCOMES_LIVE_pay", s.LiveSubject("pay", "done"), "1s"},
		{"SHAPER_OUTCOMES_LIVE_pay", s.LiveSubject("pay", "waiting"), ""},
	} {
		st, err := js.Stream(context.Background(), c.stream)
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.GetLastMsgForSubject(context.Background(), c.subject)
		if err != nil {
			t.Fatalf("%s in %s: %v", c.subject, c.stream, err)
		}
		if got := m.Header.Get(natsjs.MsgTTLHeader); got != c.ttl {
			t.Errorf("%s: Nats-TTL %q, want %q", c.subject, got, c.ttl)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, ok := get(t, s, "pay", "done"); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the final record is still there 15 s after its 2 s keep")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, ok := get(t, s, "pay", "waiting"); !ok {
		t.Fatal("the queued job's record went with the final one")
	}
}

func TestTTL(t *testing.T) {
	for keep, want := range map[time.Duration]time.Duration{
		0: time.Second, time.Millisecond: time.Second, time.Second: time.Second,
		1001 * time.Millisecond: 2 * time.Second, 24 * time.Hour: 24 * time.Hour,
	} {
		if got := ttl(keep); got != want {
			t.Errorf("ttl(%s) = %s, want %s", keep, got, want)
		}
	}
}

// Ensure is idempotent, updates the room in place, and refuses a stream
// it cannot use.
func TestEnsure(t *testing.T) {
	s, js := newStore(t)
	ensure(t, s, "pay", 1<<20, time.Hour)
	ensure(t, s, "pay", 1<<20, time.Hour)
	other, err := NewStore(s.js.Conn(), Settings{})
	if err != nil {
		t.Fatal(err)
	}
	ensure(t, other, "pay", 2<<20, time.Hour)
	if got := streamConfig(t, js, "SHAPER_OUTCOMES_pay").MaxBytes; got != 2<<20 {
		t.Fatalf("MaxBytes %d after Ensure with 2 MiB", got)
	}
	ensure(t, s, "pay", 0, time.Hour)
	if got := streamConfig(t, js, "SHAPER_OUTCOMES_pay").MaxBytes; got != -1 {
		t.Fatalf("MaxBytes %d after Ensure with no room bound", got)
	}
	if got := streamConfig(t, js, "SHAPER_OUTCOMES_LIVE_pay").MaxBytes; got != -1 {
		t.Fatalf("the live records' stream has MaxBytes %d, want none", got)
	}
	_, err = js.CreateStream(context.Background(), natsjs.StreamConfig{Name: "SHAPER_OUTCOMES_mem",
		Subjects: []string{"x.>"}, Storage: natsjs.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Ensure(context.Background(), "mem", 0, time.Hour)
	if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "storage") {
		t.Fatalf("Ensure over a memory stream: %v; want ErrIncompatible naming storage", err)
	}
	for _, bad := range []string{"", "a.b", "a*", "a b"} {
		if err := s.Ensure(context.Background(), bad, 0, time.Hour); err == nil {
			t.Errorf("Ensure(%q) took a bad downstream", bad)
		}
	}
}

// Put makes a deleted stream again and stores its records.
func TestPutRecreatesStream(t *testing.T) {
	s, js := newStore(t)
	ensure(t, s, "pay", 1<<20, time.Hour)
	for _, name := range []string{"SHAPER_OUTCOMES_LIVE_pay", "SHAPER_OUTCOMES_pay"} {
		if err := js.DeleteStream(context.Background(), name); err != nil {
			t.Fatal(err)
		}
	}
	put(t, s, time.Hour, rec("a1", outcome.Queued))
	if _, ok := get(t, s, "pay", "a1"); !ok {
		t.Fatal("the record put after the live stream was deleted is not there")
	}
	put(t, s, time.Hour, rec("a1", outcome.Succeeded))
	if got, ok := get(t, s, "pay", "a1"); !ok || got.State != outcome.Succeeded {
		t.Fatalf("after the finished stream was deleted: Get a1 = %+v, %v; want succeeded", got, ok)
	}
	if got := streamConfig(t, js, "SHAPER_OUTCOMES_pay").MaxBytes; got != 1<<20 {
		t.Fatalf("the stream made again has MaxBytes %d, want Ensure's 1 MiB", got)
	}
}

// A downstream never ensured has no stream: Put says which.
func TestPutUnknownDownstream(t *testing.T) {
	s, _ := newStore(t)
	r := rec("a1", outcome.Queued)
	r.Downstream = "ghost"
	err := s.Put(context.Background(), []outcome.Entry{{Record: r}})
	if err == nil || !strings.Contains(err.Error(), "ghost") {
		t.Fatalf("Put to a downstream without a stream: %v; want an error naming it", err)
	}
}

func streamConfig(t *testing.T, js natsjs.JetStream, name string) natsjs.StreamConfig {
	t.Helper()
	st, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().Config
}

// A record past its TTL is not answered, even before the server removed
// it.
func TestGetPastTTL(t *testing.T) {
	s, _ := newStore(t)
	ensure(t, s, "pay", 0, time.Hour)
	put(t, s, time.Hour, rec("done", outcome.Expired), rec("waiting", outcome.Delayed))
	s.now = func() time.Time { return time.Now().Add(time.Hour + time.Minute) }
	if _, ok := get(t, s, "pay", "done"); ok {
		t.Error("a final record an hour past its keep is answered")
	}
	if _, ok := get(t, s, "pay", "waiting"); !ok {
		t.Error("a delayed job's record is not answered an hour later")
	}
}
