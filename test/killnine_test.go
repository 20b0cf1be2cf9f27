package test

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// soak runs the kill -9 ledger for this long instead of 10 cycles:
//
//	go test ./test -run TestKillNineLosesNoAcceptedJob -shaper.soak 10m -timeout 30m
var soak = flag.Duration("shaper.soak", 0, "run the kill -9 ledger test for this long (0: 10 cycles)")

// ledger records the ids producers were told were accepted.
type ledger struct {
	mu       sync.Mutex
	accepted map[string]bool
	rejected map[string]int
}

// count is how many jobs producers were told were accepted so far.
func (lg *ledger) count() int {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return len(lg.accepted)
}

// produce sends jobs with unique payload ids by request/reply from
// `workers` goroutines, each pausing `gap` between requests, until stop.
func (lg *ledger) produce(t *testing.T, nc *nats.Conn, subject string, workers int, gap time.Duration, stop chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	var seq atomic.Int64
	for w := range workers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(gap):
				}
				id := fmt.Sprintf("job-%d-%d", w, seq.Add(1))
				m, err := nc.Request(subject, []byte(id), 2*time.Second)
				if err != nil {
					continue // no answer: not accepted as far as the producer knows
				}
				var r reply
				_ = json.Unmarshal(m.Data, &r)
				lg.mu.Lock()
				if r.Status == "accepted" {
					lg.accepted[id] = true
				} else {
					lg.rejected[r.Reason]++
				}
				lg.mu.Unlock()
			}
		})
	}
	return &wg
}

// kill -9 of the daemon mid-drain, again and again, under load: every job
// a producer was told was accepted reaches the downstream at least once.
func TestKillNineLosesNoAcceptedJob(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 ledger takes ~30 s; run without -short")
	}
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	ds.delay = 5 * time.Millisecond
	conf := fmt.Sprintf(`
nats:
  url: %q
  jetstream: { ack_wait: 2s, pinned_ttl: 1s }
admin: { listen: "%%ADMIN%%" }
shutdown_grace: 2s
downstreams:
  gateway:
    rate: 400/s
    concurrency: 8
    queue: { capacity: 100000, backend: jetstream }
    sink: { http: { url: %q, timeout: 2s } }
`, srv.ClientURL(), ds.URL)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	lg := &ledger{accepted: map[string]bool{}, rejected: map[string]int{}}
	stop := make(chan struct{})
	p := startShaperd(t, conf)
	producers := lg.produce(t, nc, "shaper.jobs.gateway", 8, 20*time.Millisecond, stop)

	// At least 10 cycles and 500 accepted jobs: a slow or busy machine
	// answers fewer requests per cycle, so it gets more cycles (up to a
	// minute) rather than a verdict on a daemon that was hardly loaded.
	cycles, begin := 0, time.Now()
	for cycles < 10 || (lg.count() < 500 && time.Since(begin) < time.Minute) || (*soak > 0 && time.Since(begin) < *soak) {
		time.Sleep(time.Duration(300+rand.IntN(700)) * time.Millisecond)
		p.kill(t)
		cycles++
		p = startShaperd(t, conf)
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	producers.Wait()

	want := lg.count()
	deadline := time.Now().Add(30 * time.Second)
	var missing []string
	for {
		got := map[string]int{}
		for _, h := range ds.snapshot() {
			got[h.body]++
		}
		missing = missing[:0]
		for id := range lg.accepted {
			if got[id] == 0 {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			dups := 0
			for _, n := range got {
				dups += n - 1
			}
			t.Logf("kill -9 cycles: %d in %s; accepted %d, rejected %v, delivered %d distinct, %d duplicate deliveries, missing %d",
				cycles, time.Since(begin).Round(time.Second), want, lg.rejected, len(got), dups, len(missing))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(missing) > 0 {
		t.Fatalf("%d accepted jobs never delivered, e.g. %v", len(missing), missing[:min(5, len(missing))])
	}
	if want < 500 {
		t.Fatalf("only %d jobs accepted in %d cycles: the test did not put the daemon under load", want, cycles)
	}
}

// The memory backend loses exactly what it held at kill -9: the depth the
// admin API reported (nothing in flight, the lane being paused).
func TestKillNineMemoryLossAccounted(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	conf := fmt.Sprintf(`
nats: { url: %q }
admin: { listen: "%%ADMIN%%" }
downstreams:
  printer:
    rate: 50/s
    queue: { capacity: 100, backend: memory }
    sink: { http: { url: %q } }
`, srv.ClientURL(), ds.URL)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	p := startShaperd(t, conf)
	for i := range 10 {
		if _, err := nc.Request("shaper.jobs.printer", []byte(fmt.Sprint("early-", i)), 2*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	ds.waitHits(t, 10, 5*time.Second)
	p.post(t, "/v1/downstreams/printer/pause")
	accepted := 10
	for i := range 25 {
		m, err := nc.Request("shaper.jobs.printer", []byte(fmt.Sprint("late-", i)), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get("Shaper-Status") == "accepted" {
			accepted++
		}
	}
	depth := p.lanes()[0].Depth
	p.kill(t)
	startShaperd(t, conf)
	time.Sleep(300 * time.Millisecond)
	delivered := len(ds.snapshot())
	if lost := accepted - delivered; lost != depth || depth != 25 {
		t.Fatalf("accepted %d, delivered %d: lost %d, but the queue held %d at the kill", accepted, delivered, lost, depth)
	}
	t.Logf("memory backend: accepted %d, delivered %d, lost %d = depth at kill -9", accepted, delivered, depth)
}
