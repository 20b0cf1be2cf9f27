package jetstream

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/queue"
)

func runStore(t *testing.T) (*Store, natsjs.JetStream) {
	t.Helper()
	return runStoreWith(t, Settings{})
}

// runStoreWith is runStore with settings set.
func runStoreWith(t testing.TB, set Settings) (*Store, natsjs.JetStream) {
	t.Helper()
	nc := runJetStream(t, 0)
	st, err := New(nc, set)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := natsjs.New(nc)
	return st, js
}

// runJetStream starts a JetStream server (store in a temporary directory,
// limited to maxStore bytes; 0 = the server's own limit) and connects.
func runJetStream(t testing.TB, maxStore int64) *nats.Conn {
	t.Helper()
	opts := natsserver.DefaultTestOptions
	opts.Port, opts.JetStream, opts.StoreDir = -1, true, t.TempDir()
	if maxStore > 0 {
		opts.JetStreamMaxStore = maxStore
	}
	srv := natsserver.RunServer(&opts)
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// openQueue ensures ls's stream and consumer in st and returns its queue.
func openQueue(t testing.TB, st *Store, ls QueueSettings) *Queue {
	t.Helper()
	if err := st.Ensure(context.Background(), []QueueSettings{ls}); err != nil {
		t.Fatal(err)
	}
	q, err := st.Queue(ls)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// An existing stream with settings the queue cannot use is reported, naming
// stream, setting, existing and wanted value, and left unchanged.
func TestEnsureIncompatibleStream(t *testing.T) {
	t.Parallel()
	st, js := runStore(t)
	ctx := context.Background()
	_, err := js.CreateStream(ctx, natsjs.StreamConfig{Name: "SHAPER_printer", Subjects: []string{"shaper.queue.printer"},
		Retention: natsjs.LimitsPolicy, Storage: natsjs.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	err = st.Ensure(ctx, []QueueSettings{{Name: "printer", Capacity: 10}})
	if !errors.Is(err, ErrIncompatible) {
		t.Fatalf("Ensure: %v, want ErrIncompatible", err)
	}
	for _, want := range []string{
		"stream SHAPER_printer: retention is Limits, shaperd needs WorkQueue",
		"stream SHAPER_printer: storage is Memory, shaperd needs File",
		"nats stream rm SHAPER_printer",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	s, _ := js.Stream(ctx, "SHAPER_printer")
	if s.CachedInfo().Config.Retention != natsjs.LimitsPolicy {
		t.Error("the stream was changed")
	}
}

// The capacity is the stream's MaxMsgs with discard new: the store's
// refusal is queue.ErrFull; a changed capacity updates the stream.
func TestEnqueueFullAndSetCap(t *testing.T) {
	t.Parallel()
	st, js := runStore(t)
	ls := QueueSettings{Name: "printer", Capacity: 2, Rate: 1}
	q := openQueue(t, st, ls)
	store := func(id string) (int, error) {
		type res struct {
			pos int
			err error
		}
		ch := make(chan res, 1)
		q.enqueue(&queue.Job{ID: id, Payload: []byte(id), Enqueued: time.Now()},
			func(pos int, err error) { ch <- res{pos, err} })
		r := <-ch
		return r.pos, r.err
	}
	for i, id := range []string{"a", "b"} {
		if pos, err := store(id); err != nil || pos != i+1 {
			t.Fatalf("store %s: position %d, %v", id, pos, err)
		}
	}
	if _, err := store("c"); !errors.Is(err, queue.ErrFull) {
		t.Fatalf("third store into capacity 2: %v, want queue.ErrFull", err)
	}
	startQueue(q, func() {})
	defer q.Stop()
	q.Configure(queue.Settings{Capacity: 3})
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, _ := js.Stream(context.Background(), "SHAPER_printer")
		if s.CachedInfo().Config.MaxMsgs == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("SetCap(3) did not update the stream's max_msgs")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestWindowSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rate float64
		conc int
		want int
	}{{1, 1, 1}, {0.5, 1, 1}, {50, 1, 50}, {50, 64, 64}, {1e6, 1, maxWindow}} {
		if got := windowFor(QueueSettings{Rate: tc.rate, Concurrency: tc.conc}); got != tc.want {
			t.Errorf("windowFor(rate %g, concurrency %d) = %d, want %d", tc.rate, tc.conc, got, tc.want)
		}
	}
}

// A stream the previous version drained through its own consumer, which
// still holds a fetched job unacked (a crash), is migrated at start: that
// consumer is deleted with one log line, and every job, the held one
// included, is promoted and started once.
func TestLegacyConsumerMigrated(t *testing.T) {
	t.Parallel()
	var logs strings.Builder
	var mu sync.Mutex
	st, js := runStoreWith(t, Settings{Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))})
	ctx := context.Background()
	ls := QueueSettings{Name: "legacy", Capacity: 10, Rate: 100, Concurrency: 4}
	cfg := st.streamConfig(ls.Name, ls.bounds())
	cfg.AllowDirect = false // as the previous version made it
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} {
		if _, err := js.PublishMsg(ctx, encode(st.Subject(ls.Name), job(name, "", 0))); err != nil {
			t.Fatal(err)
		}
	}
	old, err := js.CreateOrUpdateConsumer(ctx, cfg.Name, natsjs.ConsumerConfig{Durable: Consumer, AckPolicy: natsjs.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	held, err := old.Fetch(1)
	if err != nil {
		t.Fatal(err)
	}
	for range held.Messages() { // fetched, never acked: the previous drainer died
	}
	q := openQueue(t, st, ls)
	startQueue(q, func() {})
	defer q.Stop()
	got := strings.Join(takeN(t, q, 3), " ")
	if got != "a b c" {
		t.Fatalf("starts %q, want a b c", got)
	}
	if _, err := js.Consumer(ctx, cfg.Name, Consumer); !errors.Is(err, natsjs.ErrConsumerNotFound) {
		t.Fatalf("the previous version's consumer: %v, want deleted", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logs.String(), "jetstream queue migrated"); n != 1 {
		t.Fatalf("%d migration log lines, want 1:\n%s", n, logs.String())
	}
	if j := takeWithin(q, 500*time.Millisecond); j != nil {
		t.Fatalf("%s started again", j.Payload)
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
