package test

import (
	"fmt"
	"net"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
)

// resumeBound is how soon after the NATS server is back a durable lane
// delivers again: the client's reconnect wait (250 ms + jitter ≤ 1 s), the
// re-pin and one fetch wait (≤ 2 s), with margin for a loaded machine.
const resumeBound = 5 * time.Second

// The NATS server restarts (same store dir, same port) mid-drain: the
// daemon reconnects without help, every accepted job is delivered, and
// delivery resumes within resumeBound.
func TestNATSRestartMidDrain(t *testing.T) {
	t.Parallel()
	opts := natsOptions(t)
	srv := natsserver.RunServer(&opts)
	opts.Port = srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(func() { srv.Shutdown() })

	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(durableLane("printer", "50/s", 1000, "", ds.URL)))
	accepted := map[string]bool{}
	for i := range 200 {
		id := fmt.Sprint("job-", i)
		if r := in.request(t, "shaper.jobs.printer", []byte(id), nil); r.Status == "accepted" {
			accepted[id] = true
		}
	}
	ds.waitHits(t, 50, 5*time.Second) // mid-drain: 150 still stored
	srv.Shutdown()
	srv.WaitForShutdown()
	down := len(ds.snapshot())
	time.Sleep(time.Second)
	srv = natsserver.RunServer(&opts)
	back := time.Now()
	ds.waitHits(t, down+1, resumeBound+time.Second)
	resumed := time.Since(back)
	t.Logf("NATS restart: delivery resumed %s after the server was back", resumed.Round(time.Millisecond))
	if resumed > resumeBound {
		t.Errorf("resumed after %s, bound %s", resumed, resumeBound)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := map[string]bool{}
		for _, h := range ds.snapshot() {
			got[h.body] = true
		}
		missing := 0
		for id := range accepted {
			if !got[id] {
				missing++
			}
		}
		if missing == 0 {
			t.Logf("NATS restart: %d accepted, %d deliveries, 0 lost", len(accepted), len(ds.snapshot()))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d accepted jobs not delivered after the NATS restart", missing, len(accepted))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The producer side works again too.
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	m, err := nc.Request("shaper.jobs.printer", []byte("after"), 5*time.Second)
	if err != nil || m.Header.Get("Shaper-Status") != "accepted" {
		t.Fatalf("job after restart: %v %v", err, m)
	}
}
