package natskv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shaperd/shaper/limiter"
)

func runServer(t testing.TB) *server.Server {
	t.Helper()
	opts := natsserver.DefaultTestOptions
	opts.Port = -1
	opts.JetStream = true
	opts.StoreDir = t.TempDir()
	srv := natsserver.RunServer(&opts)
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv
}

// restartServer shuts srv down and starts a server on the same port and
// store directory; clients reconnect.
func restartServer(t testing.TB, srv *server.Server, dir string) *server.Server {
	t.Helper()
	port := srv.Addr().(*net.TCPAddr).Port
	if dir == "" || dir == "." {
		t.Fatalf("restartServer needs the store directory, got %q", dir)
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	opts := natsserver.DefaultTestOptions
	opts.Port = port
	opts.JetStream = true
	opts.StoreDir = dir
	next := natsserver.RunServer(&opts)
	t.Cleanup(func() { next.Shutdown(); next.WaitForShutdown() })
	return next
}

// newStore connects to srv and returns a store that Cleanup closes.
func newStore(t testing.TB, srv *server.Server, set Settings) *Store {
	t.Helper()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	st, err := New(nc, set)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close(); nc.Close() })
	if err := st.Ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st
}

func newLimiter(t testing.TB, st *Store, cfg limiter.Config, opts Options) *Limiter {
	t.Helper()
	l, err := st.Limiter("printer", cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

var t0 = time.Unix(1_700_000_000, 0) // no monotonic reading: timelines are UnixNano

// Every mode decides through the bucket exactly as limiter.Keyed decides in
// memory, step by step at fixed instants.
func TestDecisionsMatchMemory(t *testing.T) {
	srv := runServer(t)
	st := newStore(t, srv, Settings{})
	cfgs := []limiter.Config{
		{Mode: limiter.TokenBucketMode, Rate: 2, Burst: 3},
		{Mode: limiter.GCRAMode, Rate: 2, Burst: 3},
		{Mode: limiter.FixedWindowMode, Limit: 3, Window: time.Second},
		{Mode: limiter.SlidingCounterMode, Limit: 3, Window: time.Second},
		{Mode: limiter.SlidingLogMode, Limit: 3, Window: time.Second},
	}
	steps := []time.Duration{0, 0, 0, 0, 100 * time.Millisecond, 400 * time.Millisecond, 500 * time.Millisecond,
		900 * time.Millisecond, 1100 * time.Millisecond, 1100 * time.Millisecond, 1600 * time.Millisecond, 3 * time.Second}
	for _, cfg := range cfgs {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			mem, err := limiter.NewKeyed(cfg)
			if err != nil {
				t.Fatal(err)
			}
			kv := newLimiter(t, st, cfg, Options{})
			for i, at := range steps {
				now := t0.Add(at)
				cost := 1 + i%2
				want, werr := mem.AllowAt("tenant", now, cost)
				got, gerr := kv.AllowAt("tenant", now, cost)
				if (werr != nil) != (gerr != nil) || got != want {
					t.Fatalf("step %d at +%s cost %d: kv %+v (%v), memory %+v (%v)", i, at, cost, got, gerr, want, werr)
				}
			}
			if _, err := kv.AllowAt("tenant", t0, 4); !errors.Is(err, limiter.ErrCostTooLarge) {
				t.Fatalf("cost 4: err %v, want ErrCostTooLarge", err)
			}
			if _, err := kv.AllowAt("tenant", t0, 0); !errors.Is(err, limiter.ErrInvalidCost) {
				t.Fatalf("cost 0: err %v, want ErrInvalidCost", err)
			}
		})
	}
}

// Three stores (three instances) share one limit exactly: at one instant,
// 50 producers per instance on one key admit exactly the burst in total,
// and a conflict-heavy load is retried, not failed.
func TestSharedLimitIsExact(t *testing.T) {
	srv := runServer(t)
	reg := prometheus.NewRegistry()
	met := NewMetrics(reg)
	cfg := limiter.Config{Mode: limiter.TokenBucketMode, Rate: 0.001, Burst: 40}
	var ls []*Limiter
	for range 3 {
		ls = append(ls, newLimiter(t, newStore(t, srv, Settings{Metrics: met, Timeout: 5 * time.Second}), cfg, Options{FailClosed: true}))
	}
	var admitted, rejected atomic.Int64
	var wg sync.WaitGroup
	for i := range 150 {
		wg.Go(func() {
			d, err := ls[i%3].AllowAt("hot", t0.Add(time.Duration(i)*time.Microsecond), 1)
			switch {
			case err != nil:
				t.Errorf("AllowAt: %v", err)
			case d.Allowed:
				admitted.Add(1)
			default:
				rejected.Add(1)
			}
		})
	}
	wg.Wait()
	if admitted.Load() != 40 || rejected.Load() != 110 {
		t.Fatalf("admitted %d, rejected %d; want 40 and 110", admitted.Load(), rejected.Load())
	}
	if n := testutil.ToFloat64(met.errors.WithLabelValues("printer")); n != 0 {
		t.Fatalf("store errors %v, want 0", n)
	}
	t.Logf("conflicts retried: %v", testutil.ToFloat64(met.conflicts.WithLabelValues("printer")))
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}

// Admission keys are hashed: no tenant text in a subject, and keys that
// are not valid subject tokens work.
func TestKeysAreHashed(t *testing.T) {
	srv := runServer(t)
	st := newStore(t, srv, Settings{})
	l := newLimiter(t, st, limiter.Config{Mode: limiter.GCRAMode, Rate: 1, Burst: 1}, Options{FailClosed: true})
	keys := []string{"", "acme corp", "a.b.*.>", "tenant/ü/😀", strings.Repeat("k", 5000)}
	for _, k := range keys {
		if d, err := l.AllowAt(k, time.Now(), 1); err != nil || !d.Allowed {
			t.Fatalf("key %q: %+v %v", k, d, err)
		}
		if d, err := l.AllowAt(k, time.Now(), 1); err != nil || d.Allowed {
			t.Fatalf("key %q second: %+v %v, want rejected", k, d, err)
		}
	}
	kv, err := st.js.KeyValue(context.Background(), DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	names, err := kv.ListKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for name := range names.Keys() {
		n++
		if !strings.HasPrefix(name, "printer.") || len(name) != len("printer.")+32 || strings.Contains(name, "acme") {
			t.Fatalf("stored key %q: want printer.<32 hex>", name)
		}
	}
	if n != len(keys) {
		t.Fatalf("%d keys stored, want %d", n, len(keys))
	}
}

// An idle key vanishes from the bucket once its state is fresh again (TTL
// rounded up to whole seconds, then the expiry marker's second).
func TestIdleKeysExpire(t *testing.T) {
	t.Parallel() // waits out a TTL in real time, on a server of its own
	srv := runServer(t)
	st := newStore(t, srv, Settings{})
	l := newLimiter(t, st, limiter.Config{Mode: limiter.TokenBucketMode, Rate: 10, Burst: 5}, Options{})
	for i := range 20 {
		if _, err := l.AllowAt("tenant-"+string(rune('a'+i)), time.Now(), 5); err != nil {
			t.Fatal(err)
		}
	}
	s, err := st.js.Stream(context.Background(), "KV_"+DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	msgs := func() uint64 {
		info, err := s.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	if n := msgs(); n != 20 {
		t.Fatalf("%d messages in the bucket, want 20", n)
	}
	start := time.Now()
	for msgs() > 0 {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%d keys still in the bucket after 10 s (TTL 1 s + marker 1 s)", msgs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("bucket empty %s after the last write", time.Since(start).Round(100*time.Millisecond))
	if l.Sweep(time.Now()) != 20 {
		t.Fatal("Sweep should forget the 20 cached fresh states")
	}
	// A key that expired starts fresh: the full burst again.
	if d, err := l.AllowAt("tenant-a", time.Now(), 5); err != nil || !d.Allowed {
		t.Fatalf("expired key: %+v %v, want a full burst", d, err)
	}
}

// With JetStream down, fail-open admits and counts the error, fail-closed
// returns ErrUnavailable, both quickly; when it is back, decisions are
// exact again.
func TestStoreUnavailable(t *testing.T) {
	srv := runServer(t)
	reg := prometheus.NewRegistry()
	met := NewMetrics(reg)
	st := newStore(t, srv, Settings{Metrics: met, Timeout: 200 * time.Millisecond})
	cfg := limiter.Config{Mode: limiter.TokenBucketMode, Rate: 0.001, Burst: 1}
	open, err := st.Limiter("open", cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	closed, err := st.Limiter("closed", cfg, Options{FailClosed: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*Limiter{open, closed} {
		if d, err := l.AllowAt("k", t0, 1); err != nil || !d.Allowed {
			t.Fatalf("before: %+v %v", d, err)
		}
	}
	storeDir := filepath.Dir(srv.StoreDir()) // StoreDir is "" once JetStream is off
	if err := srv.ShutdownJetStream(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		begin := time.Now()
		key := fmt.Sprint("new-", i) // k's exhausted state is cached: it is rejected without I/O
		d, err := open.AllowAt(key, t0, 1)
		if err != nil || !d.Allowed {
			t.Fatalf("fail open %d: %+v %v, want admitted", i, d, err)
		}
		if _, err := closed.AllowAt(key, t0, 1); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("fail closed %d: %v, want ErrUnavailable", i, err)
		}
		if el := time.Since(begin); el > time.Second {
			t.Fatalf("decisions took %s while JetStream is down; want at most the timeout each", el)
		}
	}
	if n := testutil.ToFloat64(met.errors.WithLabelValues("open")); n != 5 {
		t.Fatalf("errors{open} = %v, want 5", n)
	}
	if n := testutil.ToFloat64(met.errors.WithLabelValues("closed")); n != 5 {
		t.Fatalf("errors{closed} = %v, want 5", n)
	}
	srv = restartServer(t, srv, storeDir) // re-enabling JetStream in place races inside nats-server
	deadline := time.Now().Add(10 * time.Second)
	for {
		// A write that landed while its answer was lost in the restart
		// has charged "after": decided (err nil) is what counts here.
		_, err := closed.AllowAt("after", t0, 1)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("store still unavailable 10 s after JetStream came back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The state written before the outage survived it (file storage): a
	// fresh instance, with nothing cached, still finds k exhausted.
	other, err := newStore(t, srv, Settings{}).Limiter("closed", cfg, Options{FailClosed: true})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := other.AllowAt("k", t0, 1); err != nil || d.Allowed {
		t.Fatalf("k after the outage: %+v %v, want rejected", d, err)
	}
}

// A bucket made without LimitMarkerTTL cannot expire keys: refused.
func TestIncompatibleBucket(t *testing.T) {
	srv := runServer(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "OLD"}); err != nil {
		t.Fatal(err)
	}
	st, err := New(nc, Settings{Bucket: "OLD"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Ensure(context.Background()); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("Ensure: %v, want ErrIncompatible", err)
	}
	if _, err := New(nc, Settings{Bucket: "bad.name"}); err == nil {
		t.Fatal("bucket bad.name accepted")
	}
}

// Approximate mode: three instances answering from local copies synced
// every 100 ms stay within the documented bound, burst + rate × elapsed +
// (N−1) × (burst + rate × sync interval), and the long-run rate holds
// (the debt is charged).
func TestApproximateBound(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 3 s of real time")
	}
	t.Parallel() // 3 s of real time, mostly sleeping, on a server of its own
	srv := runServer(t)
	cfg := limiter.Config{Mode: limiter.TokenBucketMode, Rate: 10, Burst: 50}
	var ls []*Limiter
	for range 3 {
		ls = append(ls, newLimiter(t, newStore(t, srv, Settings{}), cfg, Options{Approximate: true}))
	}
	var admitted atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for p := range 12 {
		wg.Go(func() {
			for time.Since(start) < 3*time.Second {
				if d, err := ls[p%3].AllowAt("hot", time.Now(), 1); err != nil {
					t.Errorf("AllowAt: %v", err)
					return
				} else if d.Allowed {
					admitted.Add(1)
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	exact := 50 + 10*el
	bound := exact + 2*(50+10*0.1)
	t.Logf("approximate, 3 instances: %d admitted in %.2fs; exact limit %.0f, documented bound %.0f", admitted.Load(), el, exact, bound)
	if float64(admitted.Load()) > bound {
		t.Fatalf("admitted %d > bound %.0f", admitted.Load(), bound)
	}
}
