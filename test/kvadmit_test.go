package test

import (
	"context"
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
)

// kvLane is a downstream whose admission lives in the shared NATS KV
// bucket: queue capacity and drain rate are ample, so admission is what
// the test measures.
func kvLane(name, admission string, url string) string {
	return lane(name, "1000/s", 100000, `    concurrency: 50
    admission: { mode: token_bucket, rate: 10/s, burst: 50, store: nats`+admission+` }
`, url)
}

// hammer sends jobs for keys from producers goroutines (over conns, in
// turn) until d has passed, and returns the accepted count per key and the
// span from the first send to the last reply.
func hammer(t *testing.T, conns []*nats.Conn, producers int, keys []string, d time.Duration) (map[string]int, time.Duration) {
	t.Helper()
	var mu sync.Mutex
	accepted := map[string]int{}
	var other atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			nc := conns[p%len(conns)]
			for i := 0; time.Since(start) < d; i++ {
				key := keys[(p+i)%len(keys)]
				m := nats.NewMsg("shaper.jobs.erp")
				m.Header.Set("Shaper-Key", key)
				resp, err := nc.RequestMsg(m, 5*time.Second)
				if err != nil {
					t.Errorf("request: %v", err)
					return
				}
				switch resp.Header.Get("Shaper-Status") {
				case "accepted":
					mu.Lock()
					accepted[key]++
					mu.Unlock()
				default:
					if r := resp.Header.Get("Shaper-Reason"); r != "rate_limited" {
						other.Add(1)
						t.Errorf("rejected %s: %s", r, resp.Data)
					}
				}
			}
		})
	}
	wg.Wait()
	return accepted, time.Since(start)
}

// Three shaperd on one NATS, one limit (token bucket burst 50, 10/s) kept in
// the KV bucket: many producers on the same keys get at most burst + rate ×
// elapsed admitted per key in total — exact, no slack — and no tenant name
// appears in the bucket's subjects.
func TestKVAdmissionThreeInstancesExact(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	var conns []*nats.Conn
	var ins []*instance
	// Exactness is the claim for a healthy store; give each decision 2 s
	// (default 250 ms) so that a busy machine under -race is not mistaken
	// for a failing store, which would fall open and be counted instead.
	cfg := strings.Replace(baseConfig(kvLane("erp", "", ds.URL)),
		`nats: { url: "%NATS%" }`, `nats: { url: "%NATS%", jetstream: { admission_timeout: 2s } }`, 1)
	for range 3 {
		in := startDaemon(t, srv, cfg)
		ins = append(ins, in)
		conns = append(conns, in.nc)
	}
	keys := []string{"acme corp", "globex"}
	accepted, elapsed := hammer(t, conns, 24, keys, 2500*time.Millisecond)
	bound := 50 + int(10*elapsed.Seconds())
	for _, k := range keys {
		got := accepted[k]
		t.Logf("key %q: %d admitted in %s by 3 instances (bound %d)", k, got, elapsed.Round(time.Millisecond), bound)
		if got > bound {
			t.Errorf("key %q: %d admitted, more than burst + rate × elapsed = %d", k, got, bound)
		}
		if got < 50+int(10*elapsed.Seconds()*0.6) {
			t.Errorf("key %q: only %d admitted; the limit should admit about %d", k, got, bound)
		}
	}
	for i, in := range ins {
		if n := in.metric(t, `shaper_admission_store_errors_total{downstream="erp"}`); n != 0 {
			t.Errorf("instance %d: %v store errors", i, n)
		}
		t.Logf("instance %d: %v CAS conflicts retried", i, in.metric(t, `shaper_admission_store_conflicts_total{downstream="erp"}`))
	}
	js, err := jetstream.New(ins[0].nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(context.Background(), "SHAPER_ADMISSION")
	if err != nil {
		t.Fatal(err)
	}
	lister, err := kv.ListKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for k := range lister.Keys() {
		n++
		if strings.Contains(k, "acme") || strings.Contains(k, "globex") {
			t.Errorf("bucket key %q names a tenant", k)
		}
	}
	if n != len(keys) {
		t.Errorf("%d keys in the bucket, want %d", n, len(keys))
	}
}

// With JetStream down (core NATS up, so jobs still arrive), a fail-open
// downstream admits and counts shaper_admission_store_errors_total, a
// fail-closed one rejects unavailable with Retry-After; when JetStream is
// back both decide from the bucket again.
func TestKVAdmissionStoreDown(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	cfg := baseConfig(
		strings.Replace(kvLane("open", "", ds.URL), "open:", "open:", 1),
		kvLane("closed", ", fail_closed: true", ds.URL),
	) + "\n" // nats.jetstream.admission_timeout keeps an outage's decisions short
	cfg = strings.Replace(cfg, `nats: { url: "%NATS%" }`, `nats: { url: "%NATS%", jetstream: { admission_timeout: 200ms } }`, 1)
	in := startDaemon(t, srv, cfg)
	send := func(ds, key string) reply {
		return in.request(t, "shaper.jobs."+ds, nil, map[string]string{"Shaper-Key": key})
	}
	for _, d := range []string{"open", "closed"} {
		if r := send(d, "k"); r.Status != "accepted" {
			t.Fatalf("%s before the outage: %+v", d, r)
		}
	}
	storeDir := filepath.Dir(srv.StoreDir()) // StoreDir is "" once JetStream is off
	if err := srv.ShutdownJetStream(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		key := fmt.Sprint("outage-", i)
		if r := send("open", key); r.Status != "accepted" {
			t.Fatalf("fail open: %+v", r)
		}
		r := send("closed", key)
		if r.Status != "rejected" || r.Reason != "unavailable" || r.Header.Get("Retry-After") != "1" {
			t.Fatalf("fail closed: %+v (Retry-After %q), want unavailable with Retry-After 1", r, r.Header.Get("Retry-After"))
		}
	}
	if n := in.metric(t, `shaper_admission_store_errors_total{downstream="open"}`); n != 5 {
		t.Errorf("store errors{open} = %v, want 5", n)
	}
	if n := in.metric(t, `shaper_jobs_rejected_total{downstream="closed",reason="unavailable"}`); n != 5 {
		t.Errorf("rejected{closed,unavailable} = %v, want 5", n)
	}
	// KV restart: the server comes back on the same port and store (the
	// daemon reconnects). Re-enabling JetStream in place races inside
	// nats-server, hence a restart.
	restartNATS(t, srv, storeDir)
	deadline := time.Now().Add(15 * time.Second)
	for {
		r, ok := trySend(in, "closed", "after")
		if ok && r.Status == "accepted" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fail closed still rejecting 15 s after the restart: %+v", r)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The limit holds again: a new key gets its burst of 50 (plus what
	// refills meanwhile at 10/s), then rate_limited.
	begin, n := time.Now(), 0
	for ; n <= 200; n++ {
		r := send("closed", "again")
		if r.Status != "accepted" {
			if r.Reason != "rate_limited" {
				t.Fatalf("job %d: %+v, want accepted or rate_limited", n, r)
			}
			break
		}
	}
	if bound := 50 + int(10*time.Since(begin).Seconds()); n < 50 || n > bound {
		t.Fatalf("%d accepted before rate_limited, want 50..%d", n, bound)
	}
}

// trySend is one request that may fail while NATS restarts.
func trySend(in *instance, downstream, key string) (reply, bool) {
	m := nats.NewMsg("shaper.jobs." + downstream)
	m.Header.Set("Shaper-Key", key)
	resp, err := in.nc.RequestMsg(m, time.Second)
	if err != nil {
		return reply{Error: err.Error()}, false
	}
	return reply{Status: resp.Header.Get("Shaper-Status"), Reason: resp.Header.Get("Shaper-Reason")}, true
}

// restartNATS shuts srv down and starts a server on the same port with its
// store in dir (a test directory, cleaned up with the test); clients
// reconnect.
func restartNATS(t *testing.T, srv *server.Server, dir string) *server.Server {
	t.Helper()
	if dir == "" || dir == "." {
		t.Fatalf("restartNATS needs the store directory, got %q", dir)
	}
	port := srv.Addr().(*net.TCPAddr).Port
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
