package test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	dto "github.com/prometheus/client_model/go"

	"github.com/shaperd/shaper/config"
)

// sumCounter adds every series of a counter family in the daemon's registry.
func (in *instance) sumCounter(t *testing.T, family string) float64 {
	t.Helper()
	mfs, err := in.d.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
		for _, m := range mf.GetMetric() {
			total += counterValue(m)
		}
	}
	return total
}

func counterValue(m *dto.Metric) float64 {
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return 0
}

// seriesCount is the number of series the daemon exports.
func (in *instance) seriesCount(t *testing.T) int {
	t.Helper()
	mfs, err := in.d.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "shaper_") {
			n += len(mf.GetMetric())
		}
	}
	return n
}

func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// hostile returns the i-th of a cycle of malformed or hostile messages.
func hostile(i int) *nats.Msg {
	m := nats.NewMsg("shaper.jobs.printer")
	switch i % 8 {
	case 0:
		m.Subject = fmt.Sprintf("shaper.jobs.nope-%d", i) // unknown downstream, never a label
	case 1:
		m.Data = make([]byte, 2048) // over max_payload (1KiB)
	case 2:
		m.Header.Set("Shaper-Key", "\xff\xfe\xfd") // not UTF-8
	case 3:
		m.Header.Set("Shaper-Key", strings.Repeat("k", 4000)) // huge header value
	case 4:
		m.Header.Set("Shaper-Max-Wait", "-1h")
	case 5:
		m.Header.Set("Shaper-Max-Wait", "9999999h")
	case 6:
		m.Header["Shaper-Key"] = []string{"a", "b"} // repeated
	case 7:
		m.Subject = "shaper.jobs.printer.extra.tokens"
	}
	return m
}

// 100 000 malformed or hostile messages: no crash, every one rejected with
// a reason and counted, no new metric series, memory flat. The rejections
// for printer are plain publishes, so each is dead-lettered: stored,
// discarded by the store's bound, or counted lost when the store falls
// behind, never piling up. (The test's NATS server is in this process, so
// its store counts in the heap: a small bound, and memory storage, since a
// file store caches the block it writes, ~8 MiB of the server's memory.)
//
// Not parallel: it measures the process's heap, which tests running beside
// it (large bulk requests, kill -9 cycles) would grow too; CI's -race step
// once saw 18 MiB that way.
func TestHostileInputFlood(t *testing.T) {
	srv := runNATS(t)
	ds := newDownstream(t)
	cfg := baseConfig(lane("printer", "2/s", 10, "    dead_letters: { max_count: 100 }\n", ds.URL)) +
		"\ningress: { max_payload: 1KiB }\n"
	cfg = strings.Replace(cfg, `nats: { url: "%NATS%" }`, `nats: { url: "%NATS%", jetstream: { storage: memory } }`, 1)
	in := startDaemon(t, srv, cfg)
	series := in.seriesCount(t)
	before := heapInuse()

	const total, batch = 100000, 5000
	start := time.Now()
	for sent := 0; sent < total; sent += batch {
		for i := sent; i < sent+batch; i++ {
			if err := in.nc.PublishMsg(hostile(i)); err != nil {
				t.Fatal(err)
			}
		}
		// Let intake catch up before the next batch, so the client-side
		// pending limit (a separate, counted protection) is not what is tested.
		want := float64(sent + batch)
		waitFor(t, 30*time.Second, func() bool { return in.sumCounter(t, "shaper_jobs_rejected_total") >= want }, "intake to reject the batch")
	}
	if got := in.sumCounter(t, "shaper_jobs_rejected_total"); got != total {
		t.Errorf("rejected %v, want %d", got, total)
	}
	if got := in.sumCounter(t, "shaper_jobs_received_total"); got != total {
		t.Errorf("received %v, want %d", got, total)
	}
	if got := in.sumCounter(t, "shaper_intake_slow_consumer_dropped_total"); got != 0 {
		t.Errorf("%v messages dropped as slow consumer", got)
	}
	if got := in.seriesCount(t); got != series {
		t.Errorf("series count %d after the flood, %d before: labels came from messages", got, series)
	}
	// Every printer rejection's dead letter is accounted for (and the
	// backlog of those waiting for the store, bounded, is gone).
	var stored, discarded, lost float64
	waitFor(t, 20*time.Second, func() bool {
		stored = in.metric(t, `shaper_dead_letters{downstream="printer"}`)
		discarded = in.metric(t, `shaper_dead_letters_discarded_total{downstream="printer"}`)
		lost = in.metric(t, `shaper_dead_letters_lost_total{downstream="printer"}`)
		return stored+discarded+lost == total*3/4
	}, "every dead letter stored, discarded or lost")
	if stored > 100 {
		t.Errorf("%v dead letters stored, over max_count 100", stored)
	}
	t.Logf("printer's %d dead letters: %v stored, %v discarded by max_count, %v lost (the store fell behind)",
		total*3/4, stored, discarded, lost)
	grew := int64(heapInuse()) - int64(before)
	if grew > 16<<20 {
		t.Errorf("heap grew %d MiB over the flood", grew>>20)
	}
	t.Logf("%d hostile messages rejected in %s; heap in use grew %+d KiB; %d series before and after",
		total, time.Since(start).Round(time.Millisecond), grew>>10, series)
	in.get(t, "/healthz", 200)
	if len(ds.snapshot()) != 0 {
		t.Error("a hostile message reached the downstream")
	}
	if got := in.metric(t, `shaper_jobs_rejected_total{downstream="_unknown",reason="unknown_downstream"}`); got != total/4 {
		t.Errorf("unknown_downstream = %v, want %d", got, total/4)
	}
}

// 100 invalid reloads in a row while jobs flow: each is refused and counted,
// the running config stays, and nothing races.
func TestInvalidReloadStorm(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(lane("printer", "50/s", 100, "", ds.URL)))
	bad := []string{
		"downstreams: [truncated",
		"downstreams:\n  printer:\n    rate: fast\n",
		"downstreams:\n  printer:\n    rate: 2/s\n    queue: { capacity: 0 }\n",
		"nats: { url: nats://elsewhere:4222 }\n", // needs a restart
		"bogus_key: 1\n",
	}
	dir := t.TempDir()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = in.nc.Request("shaper.jobs.printer", []byte(fmt.Sprint(i)), time.Second)
		}
	}()
	for i := range 100 {
		path := filepath.Join(dir, fmt.Sprintf("bad-%d.yaml", i))
		if err := os.WriteFile(path, []byte(bad[i%len(bad)]), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := in.d.Reload(func() (config.Config, error) { return config.Load(path) }); err == nil {
			t.Fatalf("reload %d of %q accepted", i, bad[i%len(bad)])
		}
	}
	close(stop)
	wg.Wait()
	if got := in.metric(t, "shaper_config_reload_failures_total"); got != 100 {
		t.Errorf("reload failures = %v, want 100", got)
	}
	if r := adminRate(t, in.admin); r != 50 {
		t.Errorf("rate %v after refused reloads, want 50", r)
	}
	r := in.request(t, "shaper.jobs.printer", []byte("after"), nil)
	if r.Status != "accepted" && r.Reason != "queue_full" {
		t.Errorf("daemon unhealthy after the storm: %+v", r)
	}
}

// 500 slowloris connections (headers never finished) do not stop /healthz
// answering quickly.
func TestAdminSlowloris(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(lane("printer", "2/s", 10, "", ds.URL)))
	addr := strings.TrimPrefix(in.admin, "http://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 500 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", len(conns), err)
		}
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	start := time.Now()
	in.get(t, "/healthz", 200)
	took := time.Since(start)
	if took > time.Second {
		t.Errorf("/healthz took %s with 500 slow connections open", took)
	}
	t.Logf("/healthz answered in %s with 500 slowloris connections open", took.Round(time.Microsecond))

	// The server hangs up on them after ReadHeaderTimeout (5 s).
	c := conns[0]
	_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
	if _, err := c.Read(make([]byte, 512)); err == nil {
		// a 408 may be written first; the close follows
		_, err = c.Read(make([]byte, 512))
		if err == nil {
			t.Error("slow connection still open")
		}
	}
	if held := time.Since(start); held > 8*time.Second {
		t.Errorf("slow connection held %s; ReadHeaderTimeout is 5 s", held)
	}
}
