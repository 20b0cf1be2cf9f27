package test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// kill -9 of the daemon while producers send all-or-nothing bulk
// requests to a jetstream queue, again and again: every request's jobs
// are stored all or none (each reaches the downstream, or none does), and
// every request answered accepted is delivered whole.
func TestKillNineAtomicBulkStoresAllOrNone(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 of atomic bulk requests takes ~30 s; run without -short")
	}
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	conf := fmt.Sprintf(`
nats:
  url: %q
  jetstream: { ack_wait: 2s, pinned_ttl: 1s }
admin: { listen: "%%ADMIN%%" }
shutdown_grace: 2s
downstreams:
  gateway:
    rate: 1/h
    queue: { capacity: 1000000, backend: jetstream }
    sink: { http: { url: %q, timeout: 2s } }
`, srv.ClientURL(), ds.URL)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	const perRequest = 1000
	var mu sync.Mutex
	answered := map[string]string{} // request → status
	var sent atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for r := 0; ; r++ {
				select {
				case <-stop:
					return
				default:
				}
				req := fmt.Sprintf("r%d.%d", w, r)
				var body strings.Builder
				for i := range perRequest {
					fmt.Fprintf(&body, "{\"data\": \"%s.%d\"}\n", req, i)
				}
				m := nats.NewMsg("shaper.bulk.gateway")
				m.Data = []byte(body.String())
				m.Header.Set("Shaper-Bulk-Atomic", "true")
				sent.Add(1)
				resp, err := nc.RequestMsg(m, 10*time.Second)
				if err != nil {
					time.Sleep(50 * time.Millisecond) // no daemon: not stored as far as we know
					continue
				}
				var a struct{ Status string }
				_ = json.Unmarshal(resp.Data, &a)
				mu.Lock()
				answered[req] = a.Status
				mu.Unlock()
			}
		})
	}

	// At least 10 kills and 20 requests answered accepted (5 under -race,
	// which makes a request of 1 000 jobs several times slower): a slow
	// machine answers fewer per cycle, so it gets more cycles, up to 90 s,
	// rather than a verdict on a daemon that was hardly loaded.
	minAccepted := 20
	if raceEnabled {
		minAccepted = 5
	}
	acceptedSoFar := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, status := range answered {
			if status == "accepted" {
				n++
			}
		}
		return n
	}
	p := startShaperd(t, conf)
	cycles, begin := 0, time.Now()
	for cycles < 10 || (acceptedSoFar() < minAccepted && time.Since(begin) < 90*time.Second) {
		time.Sleep(time.Duration(200+rand.IntN(600)) * time.Millisecond)
		p.kill(t)
		cycles++
		p = startShaperd(t, conf)
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()

	p.kill(t)

	// What each request left: its jobs in the stream, and the one the
	// downstream got (the lane starts one job an hour).
	perReq := map[string]map[string]bool{}
	add := func(data []byte) {
		var payload string
		if json.Unmarshal(data, &payload) != nil || !strings.HasPrefix(payload, "r") {
			return // a window token or another of the queue's own messages
		}
		req := payload[:strings.LastIndex(payload, ".")]
		if perReq[req] == nil {
			perReq[req] = map[string]bool{}
		}
		perReq[req][payload] = true
	}
	for _, h := range ds.snapshot() {
		add([]byte(h.body))
	}
	for _, data := range streamPayloads(t, nc, "SHAPER_gateway") {
		add(data)
	}
	var partial, missing []string
	for req, jobs := range perReq {
		if len(jobs) != perRequest {
			partial = append(partial, fmt.Sprintf("%s: %d of %d", req, len(jobs), perRequest))
		}
	}
	accepted := 0
	for req, status := range answered {
		if status == "accepted" {
			accepted++
			if len(perReq[req]) != perRequest {
				missing = append(missing, req)
			}
		}
	}
	t.Logf("kill -9 cycles: %d in %s; %d requests sent, %d accepted, %d stored (each whole), %d in part, %d accepted and not stored whole",
		cycles, time.Since(begin).Round(time.Second), sent.Load(), accepted, len(perReq), len(partial), len(missing))
	if len(partial) > 0 {
		t.Errorf("requests stored in part: %v", partial[:min(5, len(partial))])
	}
	if len(missing) > 0 {
		t.Errorf("accepted requests not stored whole: %v", missing[:min(5, len(missing))])
	}
	if accepted < minAccepted {
		t.Errorf("only %d requests accepted: the test did not load the daemon", accepted)
	}
}

// streamPayloads reads every message stored in stream, in order, once
// the daemon that drained it is gone.
func streamPayloads(t *testing.T, nc *nats.Conn, stream string) [][]byte {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A work queue takes one consumer: the killed daemon's drainer goes,
	// and a consumer that never acknowledges reads every message.
	for name := range s.ConsumerNames(ctx).Name() {
		if err := s.DeleteConsumer(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour, MaxAckPending: -1})
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for n := uint64(0); n < info.State.Msgs; n++ {
		m, err := c.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatalf("reading %s: %d of %d messages: %v", stream, n, info.State.Msgs, err)
		}
		out = append(out, m.Data())
	}
	return out
}
