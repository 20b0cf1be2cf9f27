package test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/cmd/shaperd/daemon"
	"github.com/shaperd/shaper/config"
)

// Dead letters are kept (docs/dead-letters.md): the store, read with nats.go directly.

// deadStored returns downstream's stored dead letters, oldest first (none
// when its stream does not exist).
func deadStored(t *testing.T, nc *nats.Conn, downstream string) []*jetstream.RawStreamMsg {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "SHAPER_DEAD_"+downstream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		t.Fatalf("dead-letter stream of %s: %v", downstream, err)
	}
	st := s.CachedInfo().State
	var out []*jetstream.RawStreamMsg
	for seq := st.FirstSeq; st.Msgs > 0 && seq <= st.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("dead letter %d of %s: %v", seq, downstream, err)
		}
		out = append(out, m)
	}
	return out
}

// waitDead waits until downstream's store holds exactly n dead letters.
func waitDead(t *testing.T, nc *nats.Conn, downstream string, n int, within time.Duration) []*jetstream.RawStreamMsg {
	t.Helper()
	var got []*jetstream.RawStreamMsg
	waitFor(t, within, func() bool { got = deadStored(t, nc, downstream); return len(got) == n },
		fmt.Sprintf("%d dead letters stored for %s", n, downstream))
	return got
}

// always500 makes a downstream fail every try.
func always500(int, *http.Request) (int, map[string]string) {
	return http.StatusInternalServerError, nil
}

// procMetric reads one series from a shaperd process's /metrics.
func procMetric(t *testing.T, admin, series string) float64 {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if name, val, ok := strings.Cut(line, " "); ok && name == series {
			f, _ := strconv.ParseFloat(strings.TrimSpace(val), 64)
			return f
		}
	}
	t.Fatalf("metric %s not exported", series)
	return 0
}

// A durable downstream that always fails: 5 jobs stored with reason failed
// after 2 attempts, with no subscriber anywhere, and the queue empty. The
// binary runs its embedded NATS server: after kill -9 and a restart the 5
// are still there and their payloads read back.
func TestDeadLettersStoredSurviveKillNine(t *testing.T) {
	t.Parallel()
	ds := newDownstream(t)
	ds.respond = always500
	natsAddr, storeDir := freeAddr(t), filepath.Join(t.TempDir(), "nats")
	conf := fmt.Sprintf(`
nats:
  embedded: { listen: %q, store_dir: %q }
  jetstream: { ack_wait: 2s, pinned_ttl: 1s }
admin: { listen: "%%ADMIN%%" }
shutdown_grace: 2s
downstreams:
  gateway:
    rate: 50/s
    queue: { capacity: 100, backend: jetstream }
    sink: { http: { url: %q, timeout: 2s } }
    retry: { max_attempts: 2, initial_backoff: 10ms, max_backoff: 10ms }
    breaker: { failures: 0 }  # every failure a dead letter, none held
`, natsAddr, storeDir, ds.URL)
	p := startShaperd(t, conf)
	nc, err := nats.Connect("nats://" + natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 { // plain publishes: nobody waits for an answer either
		if err := nc.Publish("shaper.jobs.gateway", []byte(fmt.Sprint("payment-", i))); err != nil {
			t.Fatal(err)
		}
	}
	stored := waitDead(t, nc, "gateway", 5, 20*time.Second)
	waitFor(t, 10*time.Second, func() bool { return streamMsgs(t, nc, "gateway") == 0 }, "the jobs termed")
	ids := map[string]bool{}
	for _, m := range stored {
		if m.Header.Get("Shaper-Reason") != "failed" || m.Header.Get("Shaper-Attempt") != "2" ||
			m.Header.Get("Shaper-Downstream") != "gateway" || !strings.Contains(m.Header.Get("Shaper-Error"), "500") ||
			!strings.HasPrefix(string(m.Data), "payment-") {
			t.Fatalf("dead letter %d: %q %v", m.Sequence, m.Data, m.Header)
		}
		ids[m.Header.Get("Shaper-Job-Id")] = true
	}
	if len(ids) != 5 || len(ds.snapshot()) != 10 {
		t.Fatalf("%d distinct job ids, %d tries; want 5 and 2 each", len(ids), len(ds.snapshot()))
	}
	waitFor(t, 10*time.Second, func() bool { return procMetric(t, p.admin, `shaper_dead_letters{downstream="gateway"}`) == 5 },
		"shaper_dead_letters = 5")
	if got := procMetric(t, p.admin, `shaper_jobs_delivered_total{downstream="gateway",outcome="dead_lettered"}`); got != 5 {
		t.Errorf("dead_lettered = %v, want 5", got)
	}
	nc.Close()

	p.kill(t)
	p = startShaperd(t, conf)
	nc, err = nats.Connect("nats://" + natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	after := deadStored(t, nc, "gateway")
	if len(after) != 5 {
		t.Fatalf("%d dead letters after kill -9 and restart, want 5", len(after))
	}
	for i, m := range after {
		if string(m.Data) != string(stored[i].Data) || m.Header.Get("Shaper-Job-Id") != stored[i].Header.Get("Shaper-Job-Id") {
			t.Fatalf("dead letter %d after restart: %q %v, before: %q", m.Sequence, m.Data, m.Header, stored[i].Data)
		}
	}
	waitFor(t, 10*time.Second, func() bool { return procMetric(t, p.admin, `shaper_dead_letters{downstream="gateway"}`) == 5 },
		"shaper_dead_letters = 5 after the restart")
	t.Logf("5 dead letters stored (reason failed, attempt 2, no subscriber), 5 after kill -9 of shaperd and its embedded NATS")
}

// The store is bounded by its count: the oldest are discarded and counted.
func TestDeadLetterStoreBoundedByCount(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	ds.respond = always500
	in := startDaemon(t, srv, baseConfig(lane("printer", "100/s", 10,
		"    retry: { max_attempts: 1 }\n    dead_letters: { max_count: 3 }\n", ds.URL)))
	for i := range 5 {
		if r := in.request(t, "shaper.jobs.printer", []byte(fmt.Sprint(i)), nil); r.Status != "accepted" {
			t.Fatalf("job %d: %+v", i, r)
		}
		ds.waitHits(t, i+1, 5*time.Second) // one at a time: the store's order is the jobs'
	}
	waitFor(t, 10*time.Second, func() bool {
		return in.metric(t, `shaper_dead_letters_discarded_total{downstream="printer"}`) == 2
	}, "shaper_dead_letters_discarded_total = 2")
	var got []string
	for _, m := range deadStored(t, in.nc, "printer") {
		got = append(got, string(m.Data))
	}
	if strings.Join(got, ",") != "2,3,4" {
		t.Fatalf("stored %v, want the newest 3: 2,3,4", got)
	}
	if n := in.metric(t, `shaper_dead_letters{downstream="printer"}`); n != 3 {
		t.Errorf("shaper_dead_letters = %v, want 3", n)
	}
	if n := in.metric(t, `shaper_jobs_delivered_total{downstream="printer",outcome="dead_lettered"}`); n != 5 {
		t.Errorf("dead_lettered = %v, want 5 (each was stored before the bound discarded it)", n)
	}
}

// The store unavailable: the job stays in its work queue, taken and kept
// alive (never redelivered, never termed), the failures counted; once the
// store is back the dead letter is stored and the job leaves the queue.
func TestDeadLetterStoreUnavailableJobStaysQueued(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	ds.respond = always500
	conf := baseConfig(durableLane("gw", "10/s", 10, "    retry: { max_attempts: 1 }\n", ds.URL))
	conf = strings.Replace(conf, `nats: { url: "%NATS%" }`, `nats: { url: "%NATS%", jetstream: { ack_wait: 2s } }`, 1)
	in := startDaemon(t, srv, conf)
	js, err := jetstream.New(in.nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Take the store away: delete its stream, and hold its subject with
	// another stream, so that it cannot be made again.
	if err := js.DeleteStream(ctx, "SHAPER_DEAD_gw"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BLOCK", Subjects: []string{"shaper.dead.gw"}}); err != nil {
		t.Fatal(err)
	}
	if r := in.request(t, "shaper.jobs.gw", []byte("payment"), nil); r.Status != "accepted" {
		t.Fatalf("%+v", r)
	}
	waitFor(t, 10*time.Second, func() bool {
		return in.metric(t, `shaper_dead_letter_store_errors_total{downstream="gw"}`) >= 1
	}, "a store error counted")
	time.Sleep(5 * time.Second)                               // over two ack_waits: a job not kept alive would be redelivered
	c, err := js.Consumer(ctx, "SHAPER_WINDOW", "shaperd_gw") // the window's tokens: a job taken holds one
	if err != nil {
		t.Fatal(err)
	}
	ci, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := streamMsgs(t, in.nc, "gw"); n != 1 || ci.NumAckPending != 1 || len(ds.snapshot()) != 1 {
		t.Fatalf("store down: work queue holds %d, %d taken, %d tries; want the job queued, taken, tried once",
			n, ci.NumAckPending, len(ds.snapshot()))
	}
	errs := in.metric(t, `shaper_dead_letter_store_errors_total{downstream="gw"}`)
	if n := in.metric(t, `shaper_jobs_delivered_total{downstream="gw",outcome="dead_lettered"}`); n != 0 {
		t.Fatalf("dead_lettered = %v while the store was down", n)
	}
	blocked, _ := js.Stream(ctx, "BLOCK")
	if info, _ := blocked.Info(ctx); info.State.Msgs != 0 {
		t.Fatalf("the blocking stream took %d messages", info.State.Msgs)
	}

	back := time.Now()
	if err := js.DeleteStream(ctx, "BLOCK"); err != nil {
		t.Fatal(err)
	}
	stored := waitDead(t, in.nc, "gw", 1, 40*time.Second)
	if string(stored[0].Data) != "payment" || stored[0].Header.Get("Shaper-Reason") != "failed" {
		t.Fatalf("stored %q %v", stored[0].Data, stored[0].Header)
	}
	waitFor(t, 10*time.Second, func() bool { return streamMsgs(t, in.nc, "gw") == 0 }, "the job termed once stored")
	if got := in.metricReaches(t, `shaper_jobs_delivered_total{downstream="gw",outcome="dead_lettered"}`, 1); got != 1 {
		t.Errorf("dead_lettered = %v, want 1", got)
	}
	t.Logf("store down 5 s: job kept queued and taken, %v failed tries; stored %s after the store came back",
		errs, time.Since(back).Round(100*time.Millisecond))
}

// kill -9 between the store and the term may store a dead letter twice,
// never zero times: shaperd is killed the moment the first dead letter
// appears; after a restart every job has at least one stored dead letter
// and the work queue is empty.
func TestKillNineBetweenStoreAndTerm(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	ds.respond = always500
	conf := fmt.Sprintf(`
nats:
  url: %q
  jetstream: { ack_wait: 2s, pinned_ttl: 1s }
admin: { listen: "%%ADMIN%%" }
shutdown_grace: 2s
downstreams:
  gw:
    rate: 200/s
    concurrency: 4
    queue: { capacity: 100, backend: jetstream }
    sink: { http: { url: %q, timeout: 2s } }
    retry: { max_attempts: 1 }
    breaker: { failures: 0 }  # every failure a dead letter, none held
`, srv.ClientURL(), ds.URL)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	seen := make(chan *nats.Msg, 100)
	sub, err := nc.ChanSubscribe("shaper.dead.gw", seen)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe() //nolint:errcheck // cleanup
	p := startShaperd(t, conf)
	const jobs = 20
	ids := map[string]bool{}
	pub := nats.NewMsg("shaper.jobs.gw")
	p.post(t, "/v1/downstreams/gw/pause") // all 20 stored first, then a burst of failures
	for i := range jobs {
		pub.Data = []byte(fmt.Sprint("job-", i))
		m, err := nc.RequestMsg(pub, 5*time.Second)
		if err != nil || m.Header.Get("Shaper-Status") != "accepted" {
			t.Fatalf("job %d: %v %v", i, m, err)
		}
		ids[string(pub.Data)] = true
	}
	p.post(t, "/v1/downstreams/gw/resume")
	select {
	case <-seen:
		p.kill(t)
	case <-time.After(20 * time.Second):
		t.Fatal("no dead letter within 20 s")
	}
	atKill, queued := len(deadStored(t, nc, "gw")), streamMsgs(t, nc, "gw")

	startShaperd(t, conf)
	waitFor(t, 30*time.Second, func() bool { return streamMsgs(t, nc, "gw") == 0 }, "the work queue empty after the restart")
	per := map[string]int{}
	stored := deadStored(t, nc, "gw")
	for _, m := range stored {
		per[string(m.Data)]++
	}
	twice := 0
	for id := range ids {
		switch n := per[id]; {
		case n == 0:
			t.Errorf("job %s: no dead letter stored", id)
		case n > 1:
			twice++
		}
	}
	if len(stored) < jobs {
		t.Errorf("%d dead letters for %d jobs", len(stored), jobs)
	}
	t.Logf("killed at the first dead letter: %d stored, %d jobs still queued; after the restart %d stored for %d jobs, %d stored twice, none missing",
		atKill, queued, len(stored), jobs, twice)
}

// A rejected plain publish (queue_full) is stored with its reason.
func TestRejectedPublishStored(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(lane("printer", "10/s", 1, "", ds.URL)))
	in.do(t, http.MethodPost, "/v1/downstreams/printer/pause", http.StatusOK)
	for _, p := range []string{"a", "b", "c"} {
		m := nats.NewMsg("shaper.jobs.printer")
		m.Data = []byte(p)
		m.Header.Set("Content-Type", "text/plain")
		if err := in.nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	stored := waitDead(t, in.nc, "printer", 2, 10*time.Second)
	for i, m := range stored {
		if string(m.Data) != []string{"b", "c"}[i] || m.Header.Get("Shaper-Reason") != "queue_full" ||
			m.Header.Get("Shaper-Downstream") != "printer" || m.Header.Get("Content-Type") != "text/plain" ||
			!strings.Contains(m.Header.Get("Shaper-Error"), "full") {
			t.Fatalf("dead letter %d: %q %v", i, m.Data, m.Header)
		}
	}
	if got := in.metricReaches(t, `shaper_dead_letters{downstream="printer"}`, 2); got != 2 {
		t.Errorf("shaper_dead_letters = %v, want 2", got)
	}
}

// A remote NATS without JetStream: one log line at start says so, and dead
// letters are published as before (a subscriber receives them).
func TestNoJetStreamPublishesDeadLetters(t *testing.T) {
	t.Parallel()
	opts := natsserver.DefaultTestOptions
	opts.Port = -1
	srv := natsserver.RunServer(&opts)
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	ds := newDownstream(t)
	ds.respond = always500
	in, logs := startDaemonOpts(t, srv, baseConfig(lane("printer", "10/s", 10, "    retry: { max_attempts: 1 }\n", ds.URL)),
		daemon.Options{})
	dead := subscribeDead(t, in.nc, "shaper.dead.printer")
	for i := range 3 {
		if r := in.request(t, "shaper.jobs.printer", []byte(fmt.Sprint(i)), nil); r.Status != "accepted" {
			t.Fatalf("%+v", r)
		}
	}
	for range 3 {
		if m := recvMsg(t, dead, 10*time.Second); m.Header.Get("Shaper-Reason") != "failed" {
			t.Fatalf("dead letter %v", m.Header)
		}
	}
	n := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "has no JetStream") {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d log lines say the server has no JetStream, want 1:\n%s", n, logs)
	}
	if got := in.metricReaches(t, `shaper_jobs_delivered_total{downstream="printer",outcome="dead_lettered"}`, 3); got != 3 {
		t.Errorf("dead_lettered = %v, want 3", got)
	}
}

// SIGHUP applies dead_letters in place: the stream's limits change (the
// oldest beyond the new count are discarded), a new downstream gets its
// store.
func TestDeadLetterLimitsReload(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	ds.respond = always500
	one := lane("printer", "100/s", 10, "    retry: { max_attempts: 1 }\n", ds.URL)
	in := startDaemon(t, srv, baseConfig(one))
	for i := range 4 {
		if r := in.request(t, "shaper.jobs.printer", []byte(fmt.Sprint(i)), nil); r.Status != "accepted" {
			t.Fatalf("%+v", r)
		}
	}
	waitDead(t, in.nc, "printer", 4, 10*time.Second)
	path := filepath.Join(t.TempDir(), "reload.yaml")
	next := strings.ReplaceAll(baseConfig(
		lane("printer", "100/s", 10, "    retry: { max_attempts: 1 }\n    dead_letters: { max_age: 1h, max_count: 2 }\n", ds.URL),
		lane("scanner", "100/s", 10, "", ds.URL)), "%NATS%", srv.ClientURL())
	if err := os.WriteFile(path, []byte(next), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := in.d.Reload(func() (config.Config, error) { return config.Load(path) }); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(in.nc)
	ctx := context.Background()
	s, err := js.Stream(ctx, "SHAPER_DEAD_printer")
	if err != nil {
		t.Fatal(err)
	}
	if cfg := s.CachedInfo().Config; cfg.MaxMsgs != 2 || cfg.MaxAge != time.Hour {
		t.Fatalf("after the reload: max_msgs %d, max_age %s; want 2, 1h", cfg.MaxMsgs, cfg.MaxAge)
	}
	var got []string
	for _, m := range deadStored(t, in.nc, "printer") {
		got = append(got, string(m.Data))
	}
	if strings.Join(got, ",") != "2,3" {
		t.Errorf("stored after the reload %v, want the newest 2: 2,3", got)
	}
	if got := in.metricReaches(t, `shaper_dead_letters_discarded_total{downstream="printer"}`, 2); got != 2 {
		t.Errorf("discarded = %v, want 2", got)
	}
	sc, err := js.Stream(ctx, "SHAPER_DEAD_scanner")
	if err != nil {
		t.Fatalf("the new downstream's store: %v", err)
	}
	if cfg := sc.CachedInfo().Config; cfg.Subjects[0] != "shaper.dead.scanner" || cfg.MaxMsgs != 10000 {
		t.Errorf("new store: %+v", cfg)
	}
}
