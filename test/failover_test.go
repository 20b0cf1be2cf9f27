package test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
)

// frozenPinnedTTL is nats.jetstream.pinned_ttl in the frozen-drainer test,
// and heldBound how soon after its drainer froze a job it held must start
// again elsewhere: pinned_ttl plus a few seconds. The ack wait is left at
// its default, so the bound holds for the defaults; with a long ack wait
// (it used to be 15 s) the held jobs waited for it instead.
const (
	frozenPinnedTTL = 2 * time.Second
	heldBound       = frozenPinnedTTL + 5*time.Second
)

// Two daemons drain one jetstream downstream; the pinned one is frozen
// (SIGSTOP) while one job is in flight and the next is fetched. The other
// daemon starts both within heldBound.
func TestFrozenDrainerJobsStartAgainSoon(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs two shaperd processes for ~10 s; run without -short")
	}
	srv := runNATS(t)
	ds := newDownstream(t)
	release := make(chan struct{})
	conf := fmt.Sprintf(`
nats:
  url: %q
  jetstream: { pinned_ttl: %s }
admin: { listen: "%%ADMIN%%" }
shutdown_grace: 1s
downstreams:
  gateway:
    rate: 20/s
    queue: { capacity: 100, backend: jetstream }
    sink: { http: { url: %q, timeout: 60s } }
`, srv.ClientURL(), frozenPinnedTTL, ds.URL)
	a, b := startShaperd(t, conf), startShaperd(t, conf)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	send := func(body string) {
		m, err := nc.Request("shaper.jobs.gateway", []byte(body), 5*time.Second)
		if err != nil || m.Header.Get("Shaper-Status") != "accepted" {
			t.Fatalf("job %s: %v %v", body, err, m)
		}
	}
	hung := make(chan struct{})
	ds.mu.Lock()
	ds.respond = func(n int, _ *http.Request) (int, map[string]string) {
		if ds.snapshot()[n-1].body == "victim" && n == 1 { // its first start hangs until the test ends
			close(hung)
			<-release
		}
		return http.StatusOK, nil
	}
	ds.mu.Unlock()
	defer close(release)
	send("victim")
	<-hung
	send("fetched")
	time.Sleep(300 * time.Millisecond) // the pinned drainer fetches it behind the hung delivery
	active, standby := a, b
	if ls := b.lanes(); len(ls) == 1 && ls[0].Started > 0 {
		active, standby = b, a
	}
	if err := active.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	t.Cleanup(func() { _ = active.cmd.Process.Signal(syscall.SIGCONT) })

	started := map[string]time.Duration{}
	deadline := frozen.Add(heldBound + 15*time.Second)
	for len(started) < 2 && time.Now().Before(deadline) {
		for _, h := range ds.snapshot() {
			if h.at.After(frozen) {
				if _, ok := started[h.body]; !ok && (h.body == "victim" || h.body == "fetched") {
					started[h.body] = h.at.Sub(frozen)
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("drainer frozen with one job in flight and one fetched: started again after %v (pinned_ttl %s, default ack wait)", started, frozenPinnedTTL)
	for _, body := range []string{"victim", "fetched"} {
		d, ok := started[body]
		switch {
		case !ok:
			t.Errorf("job %q not started again within %s of the freeze", body, heldBound+15*time.Second)
		case d > heldBound:
			t.Errorf("job %q started again %s after the freeze, bound %s", body, d.Round(time.Millisecond), heldBound)
		}
	}
	if ls := standby.lanes(); len(ls) != 1 || ls[0].Started < 2 {
		t.Errorf("the standby daemon's table %+v: want 2 or more starts", ls)
	}
}

// readyBound is how soon a restarted daemon must be ready on a healthy
// NATS (the target is 2 s; the bound leaves room for a loaded machine).
const readyBound = 5 * time.Second

// restartConf is a daemon with every start-up JetStream check: two durable
// queues, their dead-letter streams, the admission bucket.
func restartConf(url, downstream string) string {
	return fmt.Sprintf(`
nats:
  url: %q
  jetstream: { replicas: %%REPLICAS%% }
admin: { listen: "%%ADMIN%%" }
downstreams:
  a:
    rate: 10/s
    queue: { capacity: 100, backend: jetstream }
    admission: { mode: token_bucket, rate: 100/s, burst: 10, store: nats }
    sink: { http: { url: %q } }
  b:
    rate: 10/s
    queue: { capacity: 100, backend: jetstream }
    sink: { http: { url: %q } }
`, url, downstream, downstream)
}

// timedStarts starts shaperd on conf n times (kill -9 between starts) and
// returns how long each took to be ready.
func timedStarts(t *testing.T, conf string, n int) []time.Duration {
	t.Helper()
	addr := freeAddr(t)
	path := filepath.Join(t.TempDir(), "shaper.yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(conf, "%ADMIN%", addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	shaperdBinary(t) // built before the clock starts
	var took []time.Duration
	for range n {
		t0 := time.Now()
		p := startShaperdFile(t, path, addr)
		took = append(took, time.Since(t0))
		p.kill(t)
	}
	return took
}

// A daemon (re)started on a healthy single node and on a healthy 3-node
// cluster is ready within readyBound, the first start included.
func TestRestartReadySoon(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts shaperd 8 times on a 3-node cluster; run without -short")
	}
	ds := newDownstream(t)
	check := func(name string, took []time.Duration) {
		t.Logf("%s: ready after %v (first start, then restarts after kill -9)", name, took)
		if worst := slices.Max(took); worst > readyBound {
			t.Errorf("%s: a start took %s to be ready, bound %s", name, worst.Round(time.Millisecond), readyBound)
		}
	}
	srv := runNATS(t)
	single := strings.ReplaceAll(restartConf(srv.ClientURL(), ds.URL), "%REPLICAS%", "1")
	check("single node", timedStarts(t, single, 4))

	srvs := runCluster(t)
	var urls []string
	for _, s := range srvs {
		urls = append(urls, s.ClientURL())
	}
	cluster := strings.ReplaceAll(restartConf(strings.Join(urls, ","), ds.URL), "%REPLICAS%", "3")
	check("3-node cluster", timedStarts(t, cluster, 4))

	// The meta leader goes away: JetStream requests sent before the others
	// elected a new one go unanswered. A daemon started then is ready soon
	// after the election instead of waiting out each lost request.
	for _, s := range srvs {
		if s.JetStreamIsLeader() {
			s.Shutdown()
			break
		}
	}
	check("3-node cluster, meta leader just stopped", timedStarts(t, cluster, 1))
	check("3-node cluster, one node down", timedStarts(t, cluster, 2))
}

// lossyJetStream answers the JetStream API on front (a server without
// JetStream of its own) by forwarding each request to back, except those
// lose(subject) is true for: they go unanswered, as they do while a
// cluster elects a leader.
func lossyJetStream(t *testing.T, front, back *server.Server, lose func(subject string) bool) {
	t.Helper()
	fnc, err := nats.Connect(front.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fnc.Close)
	bnc, err := nats.Connect(back.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bnc.Close)
	_, err = fnc.Subscribe("$JS.API.>", func(m *nats.Msg) {
		if lose(m.Subject) {
			return
		}
		go func() {
			r, err := bnc.RequestMsg(&nats.Msg{Subject: m.Subject, Data: m.Data, Header: m.Header}, 5*time.Second)
			if err == nil {
				_ = m.RespondMsg(&nats.Msg{Data: r.Data, Header: r.Header})
			}
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := fnc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// A daemon started while JetStream requests are lost for `election` (as
// during a leader election) is ready soon after they are answered again,
// instead of waiting out a long deadline per lost request: whichever
// start-up check (queues, dead-letter streams, admission bucket) they
// belong to.
func TestStartReadySoonAfterLostRequests(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts shaperd against a lossy JetStream; run without -short")
	}
	const election = 2 * time.Second
	shaperdBinary(t)
	for _, tc := range []struct {
		name string
		of   func(subject string) bool // the requests lost
	}{
		{"every request", func(string) bool { return true }},
		{"the dead-letter streams'", func(s string) bool { return strings.Contains(s, "_DEAD_") || s == "$JS.API.INFO" }},
		{"the admission bucket's", func(s string) bool { return strings.Contains(s, "SHAPER_ADMISSION") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			back := runNATS(t)
			fopts := natsOptions(t)
			fopts.JetStream = false
			front := natsserver.RunServer(&fopts)
			t.Cleanup(func() { front.Shutdown(); front.WaitForShutdown() })
			var t0 atomic.Pointer[time.Time]
			lossyJetStream(t, front, back, func(subject string) bool {
				s := t0.Load()
				return (s == nil || time.Since(*s) < election) && tc.of(subject)
			})
			ds := newDownstream(t)
			conf := strings.ReplaceAll(restartConf(front.ClientURL(), ds.URL), "%REPLICAS%", "1")
			now := time.Now()
			t0.Store(&now)
			startShaperd(t, conf)
			took := time.Since(now)
			t.Logf("%s JetStream requests lost for %s after start: ready after %s", tc.name, election, took.Round(time.Millisecond))
			if took > election+3*time.Second {
				t.Errorf("ready after %s, want within %s of the requests being answered again",
					took.Round(time.Millisecond), 3*time.Second)
			}
		})
	}
}

// A drainer frozen (SIGSTOP) past pinned_ttl and the ack wait still holds
// its fetched jobs when it wakes, while the other daemon has taken the pin
// and, with the tokens of those jobs delivered again, drains them at the
// rate. The thawed one must not start what it holds until it knows
// whether it is still pinned: starting at once would give the downstream
// two drainers' starts and the same jobs twice (the chaos test once saw 61
// starts in 1 s at 50/s from two daemons).
func TestThawedDrainerStartsNothingWhileAnotherIsPinned(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs two shaperd processes for ~15 s; run without -short")
	}
	srv := runNATS(t)
	ds := newDownstream(t)
	conf := fmt.Sprintf(`
nats:
  url: %q
  jetstream: { pinned_ttl: %s, ack_wait: %s }
admin: { listen: "%%ADMIN%%" }
shutdown_grace: 1s
downstreams:
  gateway:
    rate: 20/s
    queue: { capacity: 1000, backend: jetstream }
    sink: { http: { url: %q, timeout: 5s, headers: { X-Daemon: "%%ADMIN%%" } } }
`, srv.ClientURL(), frozenPinnedTTL, frozenPinnedTTL, ds.URL)
	a, b := startShaperd(t, conf), startShaperd(t, conf)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	fillQueue(t, nc, "shaper.jobs.gateway", 600, []byte("job"), func(int) nats.Header { return nil })
	ds.waitHits(t, 20, 10*time.Second) // draining
	active, standby := a, b
	if ls := b.lanes(); len(ls) == 1 && ls[0].Started > 0 {
		active, standby = b, a
	}
	if err := active.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = active.cmd.Process.Signal(syscall.SIGCONT) })
	// Past pinned_ttl and the ack wait (with a fetch wait to spare): the
	// standby holds the pin and the frozen one's jobs.
	time.Sleep(3*frozenPinnedTTL + time.Second)
	if ls := standby.lanes(); len(ls) != 1 || ls[0].Started == 0 {
		t.Fatalf("the standby daemon's table %+v: want it draining while the other is frozen", ls)
	}
	if err := active.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	thawed := time.Now()
	time.Sleep(3 * time.Second)
	byDaemon, bodies := map[string]int{}, map[string]int{}
	for _, h := range ds.snapshot() {
		bodies[h.jobID]++
		if h.at.After(thawed) {
			byDaemon[h.header.Get("X-Daemon")]++
		}
	}
	activeAddr := strings.TrimPrefix(active.admin, "http://")
	t.Logf("starts in the 3 s after the thaw, by daemon: %v (thawed: %s)", byDaemon, activeAddr)
	if n := byDaemon[activeAddr]; n > 0 {
		t.Errorf("the thawed daemon started %d jobs while the other was pinned and draining; want none", n)
	}
	if byDaemon[strings.TrimPrefix(standby.admin, "http://")] == 0 {
		t.Error("the standby daemon started nothing after the thaw; want it still draining")
	}
	// The job in flight at the freeze went to the standby after the ack
	// wait (at least once); no other starts twice.
	var twice []string
	for id, n := range bodies {
		if n > 1 {
			twice = append(twice, fmt.Sprintf("%s × %d", id, n))
		}
	}
	if len(twice) > 1 {
		t.Errorf("jobs started more than once: %v; want at most the one in flight at the freeze", twice)
	}
}
