package deadletter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// deadMsg is a dead letter of downstream printer with reason and payload.
func deadMsg(reason, payload string) *nats.Msg {
	m := nats.NewMsg("")
	m.Header.Set("Shaper-Reason", reason)
	m.Header.Set("Shaper-Job-Id", "job-"+payload)
	m.Header.Set("Content-Type", "text/plain")
	m.Data = []byte(payload)
	return m
}

func ensureDead(t *testing.T, d *Store, s StreamSettings) {
	t.Helper()
	if err := d.Ensure(context.Background(), []StreamSettings{s}); err != nil {
		t.Fatal(err)
	}
}

func put(t *testing.T, d *Store, reason string, payloads ...string) {
	t.Helper()
	for _, p := range payloads {
		if _, err := d.Put(context.Background(), "printer", deadMsg(reason, p)); err != nil {
			t.Fatalf("Put %s: %v", p, err)
		}
	}
}

func payloads(t *testing.T, d *Store, f Filter) ([]string, int) {
	t.Helper()
	ctx := context.Background()
	list, total, err := d.List(ctx, "printer", f)
	if err != nil {
		t.Fatalf("List %+v: %v", f, err)
	}
	var out []string
	for _, dl := range list {
		full, err := d.Get(ctx, "printer", dl.Seq)
		if err != nil {
			t.Fatalf("Get %d: %v", dl.Seq, err)
		}
		if dl.Data != nil || dl.Size != len(full.Data) || !dl.Time.Equal(full.Time) {
			t.Errorf("listed %+v, stored %+v: a listing has no payload, its size and its time", dl, full)
		}
		out = append(out, string(full.Data))
	}
	return out, total
}

// The count bound discards the oldest; Stats counts them as discarded.
func TestDeadCountBound(t *testing.T) {
	st, js := runStore(t)
	d := st
	ensureDead(t, d, StreamSettings{Downstream: "printer", Subject: "shaper.dead.printer", MaxAge: time.Hour, MaxMsgs: 3})
	s, err := js.Stream(context.Background(), "SHAPER_DEAD_printer")
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if cfg.Retention != natsjs.LimitsPolicy || cfg.Discard != natsjs.DiscardOld || cfg.Storage != natsjs.FileStorage ||
		cfg.MaxMsgs != 3 || cfg.MaxAge != time.Hour || cfg.Subjects[0] != "shaper.dead.printer" {
		t.Fatalf("stream config %+v", cfg)
	}
	put(t, d, "failed", "1", "2", "3", "4", "5")
	got, total := payloads(t, d, Filter{})
	if strings.Join(got, ",") != "3,4,5" || total != 3 {
		t.Fatalf("stored %v (total %d), want the newest 3,4,5", got, total)
	}
	stats, err := d.Stats(context.Background(), "printer")
	if err != nil {
		t.Fatal(err)
	}
	if stats.Count != 3 || stats.Discarded != 2 || stats.Oldest.IsZero() {
		t.Fatalf("stats %+v, want 3 stored, 2 discarded, an oldest time", stats)
	}
	first, _ := d.Get(context.Background(), "printer", 3)
	if !stats.Oldest.Equal(first.Time) {
		t.Errorf("oldest %s, first stored %s", stats.Oldest, first.Time)
	}
}

// The age bound discards what is older than MaxAge, counted as discarded.
func TestDeadAgeBound(t *testing.T) {
	st, _ := runStore(t)
	d := st
	ensureDead(t, d, StreamSettings{Downstream: "printer", Subject: "shaper.dead.printer", MaxAge: time.Second, MaxMsgs: 100})
	put(t, d, "expired", "a", "b")
	deadline := time.Now().Add(15 * time.Second)
	for {
		stats, err := d.Stats(context.Background(), "printer")
		if err != nil {
			t.Fatal(err)
		}
		if stats.Count == 0 {
			if stats.Discarded != 2 || !stats.Oldest.IsZero() {
				t.Fatalf("stats %+v after expiry, want 2 discarded and no oldest", stats)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d stored 15 s after a max age of 1 s", stats.Count)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// List filters by reason and After, limits, and counts every match.
func TestDeadListFilter(t *testing.T) {
	st, _ := runStore(t)
	d := st
	ensureDead(t, d, StreamSettings{Downstream: "printer", Subject: "shaper.dead.printer", MaxMsgs: 1000})
	put(t, d, "failed", "f1")
	put(t, d, "queue_full", "q1")
	put(t, d, "failed", "f2")
	// more than one fetch batch, so that List reads on
	for i := range listBatch + 10 {
		put(t, d, "expired", fmt.Sprint("e", i))
	}
	put(t, d, "failed", "f3")
	for _, tc := range []struct {
		name  string
		f     Filter
		want  string
		total int
	}{
		{"reason", Filter{Reason: "failed"}, "f1,f2,f3", 3},
		{"reason and limit", Filter{Reason: "failed", Limit: 2}, "f1,f2", 3},
		{"limit", Filter{Limit: 2}, "f1,q1", listBatch + 14},
		{"after", Filter{Reason: "failed", After: 1}, "f2,f3", 2},
		{"no match", Filter{Reason: "shutdown"}, "", 0},
		{"after the last", Filter{After: 100000}, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, total := payloads(t, d, tc.f)
			if strings.Join(got, ",") != tc.want || total != tc.total {
				t.Errorf("List %+v = %v (total %d), want %s (total %d)", tc.f, got, total, tc.want, tc.total)
			}
		})
	}
	list, total, err := d.List(context.Background(), "printer", Filter{Reason: "expired", Limit: 1})
	if err != nil || len(list) != 1 || total != listBatch+10 || list[0].Header.Get("Shaper-Reason") != "expired" {
		t.Fatalf("List expired: %+v, total %d, %v", list, total, err)
	}
	if h := list[0].Header; h.Get("Nats-Msg-Size") != "" || h.Get("Nats-Expected-Stream") != "" || h.Get("Content-Type") != "text/plain" {
		t.Errorf("listed headers %v: the producer's and Shaper-*, not the listing's", h)
	}
}

// Get returns payload and headers; Delete and Purge remove, and what they
// removed is not counted as discarded.
func TestDeadGetDeletePurge(t *testing.T) {
	st, _ := runStore(t)
	d := st
	ctx := context.Background()
	ensureDead(t, d, StreamSettings{Downstream: "printer", Subject: "shaper.dead.printer", MaxMsgs: 10})
	put(t, d, "failed", "a", "b", "c")
	dl, err := d.Get(ctx, "printer", 2)
	if err != nil {
		t.Fatal(err)
	}
	if string(dl.Data) != "b" || dl.Size != 1 || dl.Seq != 2 || dl.Header.Get("Shaper-Job-Id") != "job-b" ||
		dl.Header.Get("Nats-Expected-Stream") != "" {
		t.Fatalf("Get 2 = %+v", dl)
	}
	if err := d.Delete(ctx, "printer", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get(ctx, "printer", 2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of a deleted one: %v, want ErrNotFound", err)
	}
	if err := d.Delete(ctx, "printer", 2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Delete twice: %v, want ErrNotFound", err)
	}
	if got, _ := payloads(t, d, Filter{}); strings.Join(got, ",") != "a,c" {
		t.Fatalf("after Delete: %v", got)
	}
	if err := d.Purge(ctx, "printer"); err != nil {
		t.Fatal(err)
	}
	put(t, d, "failed", "d")
	stats, err := d.Stats(ctx, "printer")
	if err != nil {
		t.Fatal(err)
	}
	if stats.Count != 1 || stats.Discarded != 0 {
		t.Fatalf("stats %+v, want 1 stored and nothing discarded (deleted and purged are not discards)", stats)
	}
}

// Unknown downstreams and sequences are ErrNotFound, for every method.
func TestDeadNotFound(t *testing.T) {
	st, _ := runStore(t)
	d := st
	ctx := context.Background()
	ensureDead(t, d, StreamSettings{Downstream: "printer", Subject: "shaper.dead.printer", MaxMsgs: 10})
	_, _, listErr := d.List(ctx, "nope", Filter{})
	_, getErr := d.Get(ctx, "nope", 1)
	_, putErr := d.Put(ctx, "nope", deadMsg("failed", "x"))
	_, statsErr := d.Stats(ctx, "nope")
	_, seqErr := d.Get(ctx, "printer", 7)
	_, zeroErr := d.Get(ctx, "printer", 0)
	for name, err := range map[string]error{
		"List": listErr, "Get": getErr, "Put": putErr, "Stats": statsErr,
		"Delete": d.Delete(ctx, "nope", 1), "Purge": d.Purge(ctx, "nope"),
		"Get unknown seq": seqErr, "Get seq 0": zeroErr, "Delete unknown seq": d.Delete(ctx, "printer", 7),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}
	if err := d.Register([]StreamSettings{{Downstream: "x"}}); err == nil {
		t.Error("Register without a subject: no error")
	}
}

// Ensure updates limits and subject in place; Put re-creates a deleted
// stream; core subscribers still receive every dead letter.
func TestDeadEnsureUpdatesAndPutRecreates(t *testing.T) {
	st, js := runStore(t)
	d := st
	ctx := context.Background()
	ensureDead(t, d, StreamSettings{Downstream: "printer", Subject: "shaper.dead.printer", MaxMsgs: 10})
	put(t, d, "failed", "a", "b", "c")
	ensureDead(t, d, StreamSettings{Downstream: "printer", Subject: "dl.printer", MaxMsgs: 2, MaxAge: time.Minute})
	s, _ := js.Stream(ctx, "SHAPER_DEAD_printer")
	if cfg := s.CachedInfo().Config; cfg.MaxMsgs != 2 || cfg.MaxAge != time.Minute || cfg.Subjects[0] != "dl.printer" {
		t.Fatalf("updated config %+v", cfg)
	}
	sub, err := st.nc.SubscribeSync("dl.printer")
	if err != nil {
		t.Fatal(err)
	}
	put(t, d, "failed", "d")
	if m, err := sub.NextMsg(5 * time.Second); err != nil || string(m.Data) != "d" {
		t.Fatalf("core subscriber: %v, %v", m, err)
	}
	if got, _ := payloads(t, d, Filter{}); strings.Join(got, ",") != "c,d" {
		t.Fatalf("after the update to max 2: %v", got)
	}
	if err := js.DeleteStream(ctx, "SHAPER_DEAD_printer"); err != nil {
		t.Fatal(err)
	}
	// (with a subscriber on the subject, a publish nothing stores waits
	// for the client's timeout before Put re-creates the stream)
	_ = sub.Unsubscribe()
	put(t, d, "failed", "e")
	if got, _ := payloads(t, d, Filter{}); strings.Join(got, ",") != "e" {
		t.Fatalf("after re-creation: %v", got)
	}
}

// An existing stream of that name the store cannot use is ErrIncompatible
// and left unchanged.
func TestDeadEnsureIncompatible(t *testing.T) {
	st, js := runStore(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, natsjs.StreamConfig{Name: "SHAPER_DEAD_printer", Subjects: []string{"shaper.dead.printer"},
		Retention: natsjs.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	err := st.Ensure(ctx, []StreamSettings{{Downstream: "printer", Subject: "shaper.dead.printer", MaxMsgs: 10}})
	if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "retention is WorkQueue, shaperd needs Limits") {
		t.Fatalf("Ensure: %v, want ErrIncompatible naming the retention", err)
	}
}

// A server without JetStream: Ensure says so with ErrNoJetStream.
func TestDeadNoJetStream(t *testing.T) {
	opts := natsserver.DefaultTestOptions
	opts.Port = -1
	srv := natsserver.RunServer(&opts)
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	st, err := NewStore(nc, StoreSettings{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = st.Ensure(ctx, []StreamSettings{{Downstream: "printer", Subject: "shaper.dead.printer", MaxMsgs: 10}})
	if !errors.Is(err, ErrNoJetStream) {
		t.Fatalf("Ensure: %v, want ErrNoJetStream", err)
	}
	if _, err := st.Put(ctx, "printer", deadMsg("failed", "x")); !errors.Is(err, ErrNoJetStream) {
		t.Fatalf("Put: %v, want ErrNoJetStream", err)
	}
}

// discards: a recreated stream keeps the count, never decreasing.
func TestDiscardsAccounting(t *testing.T) {
	t0, t1 := time.Unix(100, 0), time.Unix(200, 0)
	info := func(created time.Time, last, msgs uint64) *natsjs.StreamInfo {
		return &natsjs.StreamInfo{Created: created, State: natsjs.StreamState{LastSeq: last, Msgs: msgs}}
	}
	var a discards
	steps := []struct {
		name    string
		info    *natsjs.StreamInfo
		removed uint64
		want    uint64
	}{
		{"existing stream: its past removals are not ours to count", info(t0, 10, 4), 0, 0},
		{"two discarded", info(t0, 12, 4), 0, 2},
		{"one deleted by us", info(t0, 12, 3), 1, 2},
		{"recreated, empty", info(t1, 0, 0), 0, 2},
		{"recreated stream discards one", info(t1, 4, 3), 0, 3},
		{"nil info", nil, 0, 3},
	}
	for _, s := range steps {
		a.removed(s.removed)
		if got := a.observe(s.info); got != s.want {
			t.Fatalf("%s: %d, want %d", s.name, got, s.want)
		}
	}
}

// runStore is a dead-letter store on a fresh JetStream server, and a
// JetStream client to look at its streams.
func runStore(t *testing.T) (*Store, natsjs.JetStream) {
	t.Helper()
	opts := natsserver.DefaultTestOptions
	opts.Port = -1
	opts.JetStream = true
	opts.StoreDir = t.TempDir()
	srv := natsserver.RunServer(&opts)
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	st, err := NewStore(nc, StoreSettings{})
	if err != nil {
		t.Fatal(err)
	}
	js, _ := natsjs.New(nc)
	return st, js
}
