package test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// failoverBound is how long the downstream may go without a start after
// the active drainer is killed: nats.jetstream.pinned_ttl (1 s here: the
// server unpins a client silent that long) plus one fetch wait of the
// standby (≤ pinned_ttl/2) plus margin for a loaded 2-core machine.
const failoverBound = 4 * time.Second

// runCluster starts a 3-node JetStream cluster on loopback.
func runCluster(t testing.TB) []*server.Server { return runClusterWith(t, nil) }

// runClusterWith is runCluster with each node's options changed by mod
// (nil: none).
func runClusterWith(t testing.TB, mod func(*server.Options)) []*server.Server {
	t.Helper()
	var srvs []*server.Server
	for try := 1; srvs == nil; try++ {
		var err error
		if srvs, err = startCluster(t, mod); err != nil {
			if try == 3 {
				t.Fatal(err)
			}
			t.Logf("%v; again, on other ports", err)
		}
	}
	for _, srv := range srvs {
		t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	}
	nc, err := nats.Connect(srvs[0].ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	waitFor(t, 20*time.Second, func() bool {
		for _, s := range srvs {
			if !s.JetStreamIsClustered() || s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) < 3 {
				return false
			}
		}
		_, err := nc.Request("$JS.API.INFO", nil, time.Second)
		return err == nil && srvs[0].JetStreamIsCurrent()
	}, "a JetStream meta leader in the 3-node cluster")
	return srvs
}

// startCluster starts the nodes of runCluster, each routed to all three
// cluster ports. The ports are picked free and released before the nodes
// bind them, so another test's server may take one first: then the node
// does not start, the others are stopped, and the error says so.
func startCluster(t testing.TB, mod func(*server.Options)) ([]*server.Server, error) {
	t.Helper()
	ports := make([]int, 3)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	routes := make([]string, 3)
	for i, p := range ports {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", p)
	}
	var srvs []*server.Server
	for i := range 3 {
		opts := natsOptions(t)
		opts.ServerName = fmt.Sprint("n", i)
		opts.Cluster = server.ClusterOpts{Name: "shaper", Host: "127.0.0.1", Port: ports[i]}
		opts.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		if mod != nil {
			mod(&opts)
		}
		srv, err := server.NewServer(&opts)
		if err == nil {
			go srv.Start()
			if !srv.ReadyForConnections(10 * time.Second) {
				err = fmt.Errorf("cluster node n%d (cluster port %d) did not start within 10 s", i, ports[i])
			}
		}
		if err != nil {
			for _, s := range append(srvs, srv) {
				if s != nil {
					s.Shutdown()
					s.WaitForShutdown()
				}
			}
			return nil, err
		}
		srvs = append(srvs, srv)
	}
	return srvs, nil
}

// TestRates runs the tests that measure achieved rates against the
// machine's capacity at the same time as each other, and before the
// other tests (which run in parallel once it is done), not beside them.
func TestRates(t *testing.T) {
	t.Run("AdaptiveShapes", func(t *testing.T) { t.Parallel(); adaptiveShapes(t) })
	t.Run("ClusterRateAndFailover", func(t *testing.T) { t.Parallel(); clusterRateAndFailover(t) })
}

// clusterRateAndFailover: three shaperd against a 3-node cluster (replicas
// 3) drain one downstream at the configured rate in total; killing the
// active drainer hands the drain to another within failoverBound and
// loses nothing. Part of TestRates.
func clusterRateAndFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test takes ~25 s; run without -short")
	}
	srvs := runCluster(t)
	ds := newDownstream(t)
	const rate = 50.0
	var urls []string
	for _, s := range srvs {
		urls = append(urls, s.ClientURL())
	}
	conf := fmt.Sprintf(`
nats:
  url: %q
  jetstream: { replicas: 3, pinned_ttl: 1s, ack_wait: 3s }
admin: { listen: "%%ADMIN%%" }
shutdown_grace: 2s
downstreams:
  gateway:
    rate: %g/s
    concurrency: 2
    queue: { capacity: 10000, backend: jetstream }
    sink: { http: { url: %q, timeout: 2s } }
`, strings.Join(urls, ","), rate, ds.URL)
	var procs []*proc
	for range 3 {
		procs = append(procs, startShaperd(t, conf))
	}
	nc, err := nats.Connect(strings.Join(urls, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const jobs = 1200 // 24 s of drain: the lane is never idle during the test
	for i := range jobs {
		m, err := nc.Request("shaper.jobs.gateway", []byte(fmt.Sprint("job-", i)), 5*time.Second)
		if err != nil || m.Header.Get("Shaper-Status") != "accepted" {
			t.Fatalf("job %d: %v %v", i, err, m)
		}
	}

	// Total rate over 10 s, after a second of warm-up.
	time.Sleep(time.Second)
	h0 := len(ds.snapshot())
	t0 := time.Now()
	time.Sleep(10 * time.Second)
	got := float64(len(ds.snapshot())-h0) / time.Since(t0).Seconds()
	t.Logf("3 daemons, 3-node cluster: delivered %.2f/s in total, configured %g/s (%.1f%%)", got, rate, 100*(got-rate)/rate)
	if got < rate*0.95 || got > rate*1.05 {
		t.Errorf("total rate %.2f/s, want %g/s ± 5%%", got, rate)
	}

	// Kill the active drainer.
	active, most := -1, uint64(0)
	for i, p := range procs {
		if ls := p.lanes(); len(ls) == 1 && ls[0].Started > most {
			active, most = i, ls[0].Started
		}
	}
	if active < 0 {
		t.Fatal("no daemon has started a job")
	}
	for i, p := range procs {
		if ls := p.lanes(); i != active && len(ls) == 1 && ls[0].Started > 0 {
			t.Errorf("daemon %d started %d jobs while daemon %d was the drainer", i, ls[0].Started, active)
		}
	}
	procs[active].kill(t)
	killed := time.Now()
	before := len(ds.snapshot())
	hits := ds.waitHits(t, before+1, 10*time.Second)
	first := hits[before].at
	for _, h := range hits[before:] {
		if h.at.Before(first) {
			first = h.at
		}
	}
	failover := first.Sub(killed)
	t.Logf("failover: next start %s after kill -9 of the active drainer", failover.Round(time.Millisecond))
	if failover > failoverBound {
		t.Errorf("failover took %s, bound %s", failover, failoverBound)
	}

	// Every job is delivered (those the dead drainer held come back after ack_wait).
	deadline := time.Now().Add(60 * time.Second)
	for {
		seen := map[string]bool{}
		for _, h := range ds.snapshot() {
			seen[h.body] = true
		}
		if len(seen) == jobs {
			t.Logf("cluster: %d jobs, %d deliveries (%d duplicates), 0 lost", jobs, len(ds.snapshot()), len(ds.snapshot())-jobs)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs delivered", len(seen), jobs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
