package test

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsserver "github.com/nats-io/nats-server/v2/test"
)

// blackhole is a TCP proxy that can stop carrying bytes while keeping every
// connection open, as a dead route or a frozen peer does.
type blackhole struct {
	ln      net.Listener
	target  string
	dropped atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
	wg      sync.WaitGroup
}

func newBlackhole(t *testing.T, target string) *blackhole {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &blackhole{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *blackhole) url() string { return "nats://" + p.ln.Addr().String() }

func (p *blackhole) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

// pipe copies src to dst, swallowing the bytes while the hole is open.
func (p *blackhole) pipe(src, dst net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.dropped.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			dst.Close() // pass the hang-up on
			return
		}
	}
}

func (p *blackhole) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (in *instance) readyStatus(t *testing.T) int {
	t.Helper()
	resp, err := httpGet(in.admin + "/readyz")
	if err != nil {
		return 0
	}
	return resp
}

// A connection that silently stops carrying data is detected within 10 s
// (2 missed pings 2 s apart: 4–6 s expected), /readyz goes false, and when
// the route heals the daemon reconnects and carries jobs again, without a
// restart.
func TestNATSBlackholeDetectedAndRecovered(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	proxy := newBlackhole(t, srv.Addr().String())
	ds := newDownstream(t)
	yaml := `
nats: { url: "` + proxy.url() + `" }
admin: { listen: "127.0.0.1:0" }
downstreams:` + lane("printer", "20/s", 10, "", ds.URL)
	in := startDaemon(t, srv, yaml)
	if in.readyStatus(t) != 200 {
		t.Fatal("not ready before the fault")
	}
	start := time.Now()
	proxy.dropped.Store(true)
	waitFor(t, 15*time.Second, func() bool { return in.readyStatus(t) == 503 }, "/readyz to report the dead connection")
	detected := time.Since(start)
	if detected > 10*time.Second {
		t.Errorf("black hole detected after %s, bound is 10 s", detected)
	}
	t.Logf("black hole detected after %s", detected.Round(time.Millisecond))

	proxy.dropped.Store(false)
	healed := time.Now()
	waitFor(t, 15*time.Second, func() bool { return in.readyStatus(t) == 200 }, "reconnect after the route heals")
	t.Logf("reconnected %s after the route healed", time.Since(healed).Round(time.Millisecond))
	if r := in.request(t, "shaper.jobs.printer", []byte("after"), nil); r.Status != "accepted" {
		t.Fatalf("after recovery: %+v", r)
	}
	ds.waitHits(t, 1, 5*time.Second)
	if got := in.metric(t, "shaper_nats_reconnects_total"); got < 1 {
		t.Errorf("reconnects = %v", got)
	}
}

// The NATS server restarts (same port, same store): the daemon reconnects
// by itself, jobs queued in memory keep draining to HTTP meanwhile, and
// intake resumes.
func TestNATSServerRestart(t *testing.T) {
	t.Parallel()
	opts := natsOptions(t)
	srv := natsserver.RunServer(&opts)
	port := srv.Addr().(*net.TCPAddr).Port
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(lane("printer", "5/s", 20, "", ds.URL)))
	for range 10 {
		in.request(t, "shaper.jobs.printer", []byte("queued"), nil)
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	waitFor(t, 10*time.Second, func() bool { return in.readyStatus(t) == 503 }, "/readyz false while NATS is down")
	ds.waitHits(t, 10, 10*time.Second) // the memory queue drains to HTTP without NATS

	opts.Port = port
	var restarted *server.Server
	down := time.Now()
	restarted = natsserver.RunServer(&opts)
	t.Cleanup(func() { restarted.Shutdown(); restarted.WaitForShutdown() })
	waitFor(t, 15*time.Second, func() bool { return in.readyStatus(t) == 200 }, "reconnect after restart")
	t.Logf("ready %s after the server came back", time.Since(down).Round(time.Millisecond))
	waitFor(t, 10*time.Second, func() bool { return in.nc.IsConnected() }, "the producer to reconnect")
	if r := in.request(t, "shaper.jobs.printer", []byte("after"), nil); r.Status != "accepted" {
		t.Fatalf("after restart: %+v", r)
	}
	ds.waitHits(t, 11, 5*time.Second)
}
