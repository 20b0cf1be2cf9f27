package test

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The chaos test's flags; without either it skips (it takes about 80 s of
// the machine, so go test ./... leaves it to its own step of CI):
//
//	go test ./test -run '^TestChaos$' -v -shaper.chaos 1m                  # CI's run, time-based seed
//	go test ./test -run '^TestChaos$' -v -shaper.chaos.seed 1733150000     # replay a run (a minute)
//	go test ./test -run '^TestChaos$' -v -shaper.chaos 10m -timeout 30m    # a soak
var (
	chaosFor  = flag.Duration("shaper.chaos", time.Minute, "how long TestChaos injects faults")
	chaosSeed = flag.Uint64("shaper.chaos.seed", 0, "TestChaos's seed (0: from the clock)")
)

// The chaos run's settings.
const (
	chaosRate        = 50.0
	chaosConcurrency = 1
	chaosPinnedTTL   = 2 * time.Second
	chaosWorkers     = 6
)

// chaosPrefetch is the jetstream queue's prefetch for the run's lane:
// max(concurrency, rate × 20 ms), at most 100 (see queue/jetstream).
var chaosPrefetch = min(max(chaosConcurrency, int(math.Ceil(chaosRate*0.020)), 1), 100)

// chaosDupPerFault bounds the deliveries of one Nats-Msg-Id beyond its
// first, per fault that can cause them (a daemon killed or frozen, a NATS
// node killed): the jobs a drainer holds when it dies or freezes come back
// to the next one (in flight: concurrency; fetched or waiting for its
// dedupe record: prefetch, since a waiting job holds its place in it;
// delivered and waiting for its outcome record before its ack: at most
// concurrency; its ack held to the end of its slot: 1), and one more for
// an ack lost with a NATS node that was the consumer's leader.
var chaosDupPerFault = 2*chaosConcurrency + chaosPrefetch + 2

// Three shaperd processes and a 3-node cluster of nats-server processes
// (a jetstream queue, replicas 3) take jobs with Nats-Msg-Ids from
// producers that retry lost or `unavailable` answers, while a seeded
// schedule of overlapping faults runs: kill -9 and restart of a daemon or
// a NATS node (the stream's leader among them), SIGSTOP of a daemon past
// pinned_ttl, SIGHUP. Afterwards: no accepted job is lost, every
// duplicate answer names a delivered job, duplicate deliveries and the
// start rate stay within their bounds, and restarted daemons were ready
// in time.
func TestChaos(t *testing.T) {
	asked := false
	flag.Visit(func(f *flag.Flag) { asked = asked || f.Name == "shaper.chaos" || f.Name == "shaper.chaos.seed" })
	if !asked || testing.Short() {
		t.Skip("the chaos test takes about 80 s (a minute of faults, set-up and drain): run it with -shaper.chaos 1m " +
			"(.ci/run does, in a step of its own) or -shaper.chaos.seed SEED, without -short")
	}
	t.Parallel()
	seed := *chaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("chaos seed %d (replay: go test ./test -run '^TestChaos$' -v -shaper.chaos %s -shaper.chaos.seed %d)", seed, *chaosFor, seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("FAILED with chaos seed %d", seed)
		}
	})
	nodes := runNATSProcesses(t)
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.url())
	}
	ds := newDownstream(t)
	c := &chaos{t: t, rng: rand.New(rand.NewPCG(seed, 0)), nodes: nodes, pinnedTTL: chaosPinnedTTL,
		counts: map[string]int{}, busy: make([]bool, 3)}
	c.conf = fmt.Sprintf(`
nats:
  url: %q
  jetstream: { replicas: 3, pinned_ttl: %s }
admin: { listen: "%%ADMIN%%" }
shutdown_grace: 2s
downstreams:
  gateway:
    rate: %g/s
    concurrency: %d
    queue: { capacity: 100000, backend: jetstream }
    sink: { http: { url: %q, timeout: 2s, headers: { X-Chaos-Daemon: "%%ADMIN%%" } } }
`, strings.Join(urls, ","), chaosPinnedTTL, chaosRate, chaosConcurrency, ds.URL)
	for range 3 {
		p, _, err := c.startDaemon()
		if err != nil {
			t.Fatal(err)
		}
		c.daemons = append(c.daemons, p)
	}
	admin, err := nats.Connect(strings.Join(urls, ","), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if c.js, err = jetstream.New(admin); err != nil {
		t.Fatal(err)
	}
	lg := &chaosLedger{replies: map[string][]chaosReply{}}
	prod := &chaosProducers{lg: lg, subject: "shaper.jobs.gateway", stop: make(chan struct{})}
	for i := range nodes { // one connection per node, that node first
		order := append([]string{urls[i]}, slices.Delete(slices.Clone(urls), i, i+1)...)
		nc, err := nats.Connect(strings.Join(order, ","), nats.DontRandomize(), nats.MaxReconnects(-1),
			nats.ReconnectWait(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		prod.conns = append(prod.conns, nc)
	}

	c.t0 = time.Now()
	prod.run(chaosWorkers, seed)
	time.Sleep(2 * time.Second) // jobs flowing before the first fault
	for time.Since(c.t0) < *chaosFor {
		c.schedule()
		time.Sleep(time.Duration(1500+c.rng.IntN(2500)) * time.Millisecond)
	}
	close(prod.stop)
	c.wg.Wait() // every fault undone: daemons up, nodes up and current
	prod.wg.Wait()
	c.note("faults over; producers stopped")

	accepted := chaosDrain(t, c, lg, ds)
	chaosCheck(t, c, lg, ds, seed, accepted)
}

// chaosDrain waits until every accepted job was delivered and the queue
// is empty, and returns the ids answered accepted.
func chaosDrain(t *testing.T, c *chaos, lg *chaosLedger, ds *downstream) map[string]bool {
	t.Helper()
	accepted := map[string]bool{}
	for id, rs := range lg.snapshot() {
		for _, r := range rs {
			if r.status == "accepted" {
				accepted[id] = true
			}
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		seen := map[string]bool{}
		for _, h := range ds.snapshot() {
			seen[h.body] = true
		}
		missing := 0
		for id := range accepted {
			if !seen[id] {
				missing++
			}
		}
		if missing == 0 && chaosQueueEmpty(c.js) {
			break
		}
		if time.Now().After(deadline) {
			t.Logf("drain: %d accepted ids still undelivered after 2 min (queue empty: %v)", missing, chaosQueueEmpty(c.js))
			c.logDaemons()
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second) // a late redelivery still counts
	return accepted
}

// logDaemons logs the warnings and errors of each daemon still running,
// the last 20 of each: what a stalled drain said.
func (c *chaos) logDaemons() {
	for i, p := range c.daemons {
		var lines []string
		for _, l := range strings.Split(p.stderr.String(), "\n") {
			if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
				lines = append(lines, l)
			}
		}
		c.t.Logf("daemon %d: %d warnings and errors; the last ones:\n%s", i, len(lines), strings.Join(lines[max(len(lines)-20, 0):], "\n"))
	}
}

// chaosQueueEmpty reports whether the queue's stream holds nothing and its
// consumer has nothing pending.
func chaosQueueEmpty(js jetstream.JetStream) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "SHAPER_gateway")
	if err != nil {
		return false
	}
	info, err := s.Info(ctx)
	return err == nil && info.State.Msgs == 0
}
