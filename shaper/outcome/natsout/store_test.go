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
// stream is laid out as the package doc says.
func TestPutGet(t *testing.T) {
	s, js := newStore(t)
	ensure(t, s, "pay", 1<<20, time.Hour)
	cfg := streamConfig(t, js, "SHAPER_OUTCOMES_pay")
	if len(cfg.Subjects) != 1 || cfg.Subjects[0] != "shaper.queue-outcomes.pay.*" || cfg.MaxMsgsPerSubject != 1 ||
		!cfg.AllowMsgTTL || !cfg.AllowDirect || cfg.Storage != natsjs.FileStorage || cfg.Discard != natsjs.DiscardOld ||
		cfg.MaxBytes != -1 || cfg.MaxMsgs != -1 || cfg.Retention != natsjs.LimitsPolicy {
		t.Fatalf("stream config %+v; want subject shaper.queue-outcomes.pay.*, no byte bound", cfg)
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
	// One message per change, and one record per job.
	if got := info(t, js, "SHAPER_OUTCOMES_pay").State.LastSeq; got != 3 {
		t.Fatalf("the stream's last sequence is %d after three changes; want one write each", got)
	}
	if n, err := s.Records(context.Background(), "pay"); err != nil || n != 2 {
		t.Fatalf("Records = %d, %v; want 2 (a later record replaces the earlier)", n, err)
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
	st, err := js.Stream(context.Background(), "SHAPER_OUTCOMES_pay")
	if err != nil {
		t.Fatal(err)
	}
	for id, ttl := range map[string]string{"done": "2s", "waiting": ""} {
		m, err := st.GetLastMsgForSubject(context.Background(), s.Subject("pay", id))
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if got := m.Header.Get(natsjs.MsgTTLHeader); got != ttl {
			t.Errorf("%s: Nats-TTL %q, want %q", id, got, ttl)
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

// Ensure is idempotent, from several instances, and refuses a stream
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
	if got := streamConfig(t, js, "SHAPER_OUTCOMES_pay"); got.MaxBytes != -1 || got.Subjects[0] != "shaper.queue-outcomes.pay.*" {
		t.Fatalf("after Ensure from another instance: max bytes %d, subjects %v", got.MaxBytes, got.Subjects)
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
	if err := js.DeleteStream(context.Background(), "SHAPER_OUTCOMES_pay"); err != nil {
		t.Fatal(err)
	}
	put(t, s, time.Hour, rec("a1", outcome.Queued))
	if _, ok := get(t, s, "pay", "a1"); !ok {
		t.Fatal("the record put after the stream was deleted is not there")
	}
	if err := js.DeleteStream(context.Background(), "SHAPER_OUTCOMES_pay"); err != nil {
		t.Fatal(err)
	}
	put(t, s, time.Hour, rec("a1", outcome.Succeeded))
	if got, ok := get(t, s, "pay", "a1"); !ok || got.State != outcome.Succeeded {
		t.Fatalf("after the stream was deleted again: Get a1 = %+v, %v; want succeeded", got, ok)
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
