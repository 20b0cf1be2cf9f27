package test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// durableConf is a config of one jetstream downstream api (queue is its
// queue block) for a shaperd process on srvURL, failing over fast.
func durableConf(srvURL, dsURL, rate, queue string) string {
	return fmt.Sprintf(`
nats:
  url: %q
  jetstream: { ack_wait: 2s, pinned_ttl: 1s }
admin: { listen: "%%ADMIN%%" }
shutdown_grace: 2s
downstreams:
  api:
    rate: %s
    queue: %s
    sink: { http: { url: %q, timeout: 2s } }
`, srvURL, rate, queue, dsURL)
}

// startDurable starts a shaperd process on conf and returns it with a
// producer's connection to srvURL (as an instance, for request).
func startDurable(t *testing.T, srvURL, conf string) (*proc, *instance) {
	t.Helper()
	nc, err := nats.Connect(srvURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return startShaperd(t, conf), &instance{nc: nc}
}

// A job delayed 3 s on a jetstream queue survives kill -9 of shaperd while
// it waits: the restarted daemon starts it once, no earlier than its
// instant and within the failover's few seconds of it.
func TestDurableDelayedSurvivesKillNine(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	conf := durableConf(srv.ClientURL(), ds.URL, "20/s", "{ capacity: 100, backend: jetstream }")
	p, in := startDurable(t, srv.ClientURL(), conf)
	sent := time.Now()
	r := in.request(t, "shaper.jobs.api", []byte("late"), map[string]string{"Shaper-Delay": "3s"})
	if r.Status != "accepted" {
		t.Fatalf("delayed job: %+v, want accepted", r)
	}
	due := sent.Add(3 * time.Second)
	time.Sleep(1500 * time.Millisecond) // fetched again and held: due within the lead
	p.kill(t)
	if hits := ds.snapshot(); len(hits) != 0 {
		t.Fatalf("started before its instant: %+v", hits)
	}
	_ = startShaperd(t, conf)
	hits := ds.waitHits(t, 1, 15*time.Second)
	if hits[0].at.Before(due) {
		t.Fatalf("started %s before its instant", due.Sub(hits[0].at))
	}
	t.Logf("started %s after its instant, attempt %d", hits[0].at.Sub(due).Round(time.Millisecond), hits[0].attempt)
	if late := hits[0].at.Sub(due); late > 5*time.Second {
		t.Errorf("started %s after its instant, want within the failover's few seconds", late)
	}
	time.Sleep(time.Second)
	if n := len(ds.snapshot()); n != 1 {
		t.Fatalf("started %d times, want once", n)
	}
}

// On a durable fair queue a flooding tenant does not hold up a quiet one,
// is capped at queue.key_capacity (queue_full naming it), and nothing
// accepted is lost across kill -9 of shaperd.
func TestDurableFairFlood(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	conf := durableConf(srv.ClientURL(), ds.URL, "20/s", "{ capacity: 100, backend: jetstream, fairness: key, key_capacity: 20 }")
	p, in := startDurable(t, srv.ClientURL(), conf)
	accepted := map[string]bool{}
	full := 0
	flood := time.Now()
	for i := range 40 {
		body := fmt.Sprint("flood-", i)
		r := in.request(t, "shaper.jobs.api", []byte(body), map[string]string{"Shaper-Key": "flood"})
		switch {
		case r.Status == "accepted":
			accepted[body] = true
		case r.Reason == "queue_full" && strings.Contains(r.Error, "queue.key_capacity"):
			full++
		default:
			t.Fatalf("flood job %d: %+v, want accepted or queue_full naming queue.key_capacity", i, r)
		}
	}
	// Each job started meanwhile (at most 20/s, and one at once) made room.
	started := 1 + int(time.Since(flood).Seconds()*20)
	if full == 0 || len(accepted) > 20+started {
		t.Fatalf("flood: %d accepted, %d refused in %v; want at most key_capacity 20 held and %d started",
			len(accepted), full, time.Since(flood).Round(time.Millisecond), started)
	}
	quietSent := time.Now()
	for i := range 3 {
		body := fmt.Sprint("quiet-", i)
		if r := in.request(t, "shaper.jobs.api", []byte(body), map[string]string{"Shaper-Key": "quiet"}); r.Status != "accepted" {
			t.Fatalf("quiet job %d: %+v, want accepted", i, r)
		}
		accepted[body] = true
	}
	waitFor(t, 5*time.Second, func() bool {
		n := 0
		for _, h := range ds.snapshot() {
			if strings.HasPrefix(h.body, "quiet-") {
				n++
			}
		}
		return n == 3
	}, "the quiet tenant's 3 jobs to start")
	t.Logf("flood: %d accepted, %d refused; the quiet tenant's 3 jobs started within %s",
		len(accepted)-3, full, time.Since(quietSent).Round(time.Millisecond))
	if d := time.Since(quietSent); d > 2*time.Second {
		t.Errorf("the quiet tenant's jobs took %s behind the flood, want them served in turn", d)
	}
	p.kill(t)
	_ = startShaperd(t, conf)
	waitFor(t, 20*time.Second, func() bool {
		got := map[string]bool{}
		for _, h := range ds.snapshot() {
			got[h.body] = true
		}
		for body := range accepted {
			if !got[body] {
				return false
			}
		}
		return true
	}, "every accepted job to be delivered across the kill -9")
}
