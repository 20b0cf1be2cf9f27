package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// freePort is a loopback port free when picked.
func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// runSuperCluster starts a super-cluster of single-node JetStream
// clusters named names, joined by gateways, and returns its servers in
// the order of names.
func runSuperCluster(t testing.TB, names ...string) []*server.Server {
	t.Helper()
	gw := make([]int, len(names))
	for i := range gw {
		gw[i] = freePort(t)
	}
	var srvs []*server.Server
	for i, name := range names {
		opts := natsOptions(t)
		opts.ServerName = "s-" + name
		cp := freePort(t)
		opts.Cluster = server.ClusterOpts{Name: name, Host: "127.0.0.1", Port: cp}
		// A JetStream cluster needs a route: a single node's is to itself.
		opts.Routes = server.RoutesFromStr(fmt.Sprintf("nats://127.0.0.1:%d", cp))
		opts.Gateway = server.GatewayOpts{Name: name, Host: "127.0.0.1", Port: gw[i]}
		for j, other := range names {
			if j != i {
				opts.Gateway.Gateways = append(opts.Gateway.Gateways, &server.RemoteGatewayOpts{Name: other,
					URLs: []*url.URL{{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", gw[j])}}})
			}
		}
		srv, err := server.NewServer(&opts)
		if err != nil {
			t.Fatal(err)
		}
		go srv.Start()
		t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
		srvs = append(srvs, srv)
	}
	for i, srv := range srvs { // a JetStream server is ready once its peers are there
		if !srv.ReadyForConnections(20 * time.Second) {
			t.Fatalf("server %s not ready", names[i])
		}
	}
	for _, srv := range srvs {
		nc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, func() bool {
			_, err := nc.Request("$JS.API.INFO", nil, time.Second)
			return err == nil
		}, "JetStream across the super-cluster from "+srv.Name())
		nc.Close()
	}
	return srvs
}

// TestAcrossRegions: one downstream shared by three regions. A
// super-cluster of three single-node clusters (home, east, west) joined
// by gateways; the downstream's stream is placed in home
// (queue.placement); a shaperd in east and one in west take intake and
// drain it, producers publish in each region. The rate holds in total,
// a Nats-Msg-Id sent in both regions is queued once, and when west's
// server goes down (its region cut off) every job accepted is still
// delivered, by east.
func TestAcrossRegions(t *testing.T) {
	if testing.Short() {
		t.Skip("a super-cluster test takes ~20 s; run without -short")
	}
	t.Parallel()
	srvs := runSuperCluster(t, "home", "east", "west")
	home, east, west := srvs[0], srvs[1], srvs[2]
	ds := newDownstream(t)
	const rate = 20.0
	conf := fmt.Sprintf(`
nats:
  url: "%%NATS%%"
  jetstream: { pinned_ttl: 1s, ack_wait: 3s }
admin: { listen: "127.0.0.1:0" }
shutdown_grace: 2s
downstreams:
  erp:
    rate: %g/s
    queue: { capacity: 10000, backend: jetstream, placement: { cluster: home } }
    sink: { http: { url: %q, timeout: 2s } }
`, rate, ds.URL)
	startDaemon(t, east, conf)
	westD := startDaemon(t, west, conf)

	// The stream lives in home.
	nc, err := nats.Connect(home.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	info, err := js.Stream(context.Background(), "SHAPER_erp")
	if err != nil {
		t.Fatal(err)
	}
	if c := info.CachedInfo().Cluster; c == nil || c.Name != "home" {
		t.Fatalf("stream SHAPER_erp is in cluster %+v; want home", c)
	}

	// Producers in east and west; every id once, and 20 ids sent in both.
	send := func(srv *server.Server, ids []string) map[string]string {
		pc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		out := map[string]string{}
		for _, id := range ids {
			m := nats.NewMsg("shaper.jobs.erp")
			m.Header.Set("Nats-Msg-Id", id)
			m.Data = []byte(id)
			r, err := pc.RequestMsg(m, 10*time.Second)
			if err != nil || r.Header.Get("Shaper-Status") != "accepted" {
				t.Fatalf("%s via %s: %v %v", id, srv.Name(), err, r)
			}
			var rep reply
			if err := json.Unmarshal(r.Data, &rep); err != nil {
				t.Fatal(err)
			}
			out[id] = rep.JobID
		}
		return out
	}
	var eastIDs, westIDs, both []string
	for i := range 60 {
		eastIDs = append(eastIDs, fmt.Sprint("e-", i))
		westIDs = append(westIDs, fmt.Sprint("w-", i))
	}
	for i := range 20 {
		both = append(both, fmt.Sprint("b-", i))
	}
	fromEast := send(east, append(eastIDs, both...))
	fromWest := send(west, append(westIDs, both...))
	for _, id := range both {
		if fromEast[id] != fromWest[id] {
			t.Errorf("%s sent in east and west: job %s and job %s; want one job", id, fromEast[id], fromWest[id])
		}
	}

	// West's region goes down mid-drain: its server and its shaperd.
	time.Sleep(2 * time.Second)
	westD.stop(t)
	west.Shutdown()

	want := len(eastIDs) + len(westIDs) + len(both)
	hits := ds.waitHits(t, want, 60*time.Second)
	seen := map[string]int{}
	for _, h := range hits {
		seen[h.body]++
	}
	for _, id := range append(append(eastIDs, westIDs...), both...) {
		if seen[id] == 0 {
			t.Errorf("%s was accepted and never delivered", id)
		}
	}
	if n := len(seen); n != want {
		t.Errorf("%d distinct jobs delivered; want %d", n, want)
	}
	worst, at := chaosWorstWindow(hits, time.Second)
	if bound := int(rate*1.1) + 1 + 1; worst > bound {
		t.Errorf("%d starts in the second from %s; want at most %d (rate %g in total across regions)", worst, at, bound, rate)
	}
}
