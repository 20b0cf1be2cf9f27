package test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestAdminAPI(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(
		lane("printer", "2/s", 10, "", ds.URL),
		lane("erp", "0.5/s", 5, "", ds.URL)))

	in.get(t, "/healthz", 200)
	in.get(t, "/readyz", 200)
	var list struct {
		Downstreams []map[string]any `json:"downstreams"`
	}
	if err := json.Unmarshal([]byte(in.get(t, "/v1/downstreams", 200)), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Downstreams) != 2 {
		t.Fatalf("downstreams %v", list.Downstreams)
	}
	for _, d := range list.Downstreams {
		for _, k := range []string{"name", "rate", "depth", "capacity", "inflight", "paused"} {
			if _, ok := d[k]; !ok {
				t.Errorf("downstream entry lacks %q: %v", k, d)
			}
		}
	}
	in.do(t, "POST", "/v1/downstreams/nope/pause", 404)
	in.do(t, "POST", "/v1/downstreams/nope/resume", 404)

	metrics := in.get(t, "/metrics", 200)
	for _, series := range []string{
		`shaper_queue_capacity{downstream="printer"} 10`,
		`shaper_queue_capacity{downstream="erp"} 5`,
		`shaper_drain_rate_per_second{downstream="erp"} 0.5`,
		`shaper_jobs_rejected_total{downstream="printer",reason="queue_full"} 0`,
		`shaper_jobs_dropped_total{downstream="erp",reason="shutdown"} 0`,
		`shaper_nats_connected 1`,
	} {
		if !strings.Contains(metrics, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
}

// Pause stops starts, not intake; resume continues from now with no burst.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(lane("printer", "10/s", 10, "", ds.URL)))
	in.do(t, "POST", "/v1/downstreams/printer/pause", 200)
	for i := range 5 {
		r := in.request(t, "shaper.jobs.printer", []byte(fmt.Sprint(i)), nil)
		if r.Status != "accepted" {
			t.Fatalf("paused lane refused intake: %+v", r)
		}
		// paused until resumed: no start is scheduled, so no eta
		if !r.Paused || strings.Contains(r.Body, "eta_seconds") || r.Position != i+1 {
			t.Errorf("reply while paused: %s; want paused, no eta_seconds, position %d", r.Body, i+1)
		}
	}
	time.Sleep(700 * time.Millisecond)
	if n := len(ds.snapshot()); n != 0 {
		t.Fatalf("%d starts while paused", n)
	}
	resumed := time.Now()
	in.do(t, "POST", "/v1/downstreams/printer/resume", 200)
	hits := ds.waitHits(t, 5, 5*time.Second)
	if span := hits[4].at.Sub(hits[0].at); span < 300*time.Millisecond {
		t.Errorf("5 starts within %s after resume: a burst", span)
	}
	if lag := hits[0].at.Sub(resumed); lag > time.Second {
		t.Errorf("first start %s after resume", lag)
	}
}

// Shutdown with jobs queued: in-flight finishes, the queued are dead-lettered
// with reason shutdown and counted; nothing disappears.
func TestShutdownDeadLettersQueued(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(lane("printer", "1/s", 10, "    dead_letter: dl.printer\n", ds.URL)))
	watcher, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	dead := subscribeDead(t, watcher, "dl.printer")
	for i := range 6 {
		in.request(t, "shaper.jobs.printer", []byte(fmt.Sprint(i)), nil)
	}
	ds.waitHits(t, 1, 5*time.Second)
	in.stop(t)
	delivered := len(ds.snapshot())
	got := 0
	for got+delivered < 6 {
		m := recvMsg(t, dead, 5*time.Second)
		if m.Header.Get("Shaper-Reason") != "shutdown" {
			t.Errorf("reason %q, want shutdown", m.Header.Get("Shaper-Reason"))
		}
		got++
	}
	if delivered+got != 6 {
		t.Errorf("delivered %d + dead-lettered %d != 6 accepted", delivered, got)
	}
}

// A NATS sink publishes the payload with the Shaper-* headers; with
// request: true, a reply is success.
func TestNATSSinkRequest(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	cfg := `
nats: { url: "%NATS%" }
admin: { listen: "127.0.0.1:0" }
downstreams:
  orders:
    rate: 100/s
    queue: { capacity: 10, backend: memory }
    sink:
      nats: { subject: erp.orders, request: true, timeout: 2s }
`
	in := startDaemon(t, srv, cfg)
	got := make(chan *nats.Msg, 4)
	sub, err := in.nc.Subscribe("erp.orders", func(m *nats.Msg) {
		got <- m
		_ = m.Respond([]byte("ok"))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	_ = in.nc.Flush()
	r := in.request(t, "shaper.jobs.orders", []byte("order-1"), map[string]string{"Content-Type": "application/json"})
	m := recvMsg(t, got, 5*time.Second)
	if string(m.Data) != "order-1" || m.Header.Get("Shaper-Job-Id") != r.JobID ||
		m.Header.Get("Idempotency-Key") != r.JobID || m.Header.Get("Shaper-Attempt") != "1" {
		t.Errorf("sink message %q headers %v (job %s)", m.Data, m.Header, r.JobID)
	}
	if m.Header.Get("Content-Type") != "application/json" {
		t.Errorf("Content-Type not passed through: %v", m.Header)
	}
}

// Every series a running daemon exports — shaper, daemon, admission store,
// status-page sampler — passes Prometheus' own lint (names, units, help).
func TestMetricsLint(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(
		lane("printer", "2/s", 10, "", ds.URL),
		lane("kv", "2/s", 10, "    admission: { mode: token_bucket, rate: 1/s, burst: 5, store: nats }\n", ds.URL)))
	in.request(t, "shaper.jobs.printer", []byte("x"), nil)
	in.request(t, "shaper.jobs.kv", []byte("x"), map[string]string{"Shaper-Key": "k"})
	problems, err := testutil.GatherAndLint(in.d.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
