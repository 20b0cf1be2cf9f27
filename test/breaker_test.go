package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBreakerHoldsThroughOutage: a downstream that answers 502 for 6 s
// behind a breaker (3 failures, open 1 s doubling to 2 s) sees the three
// tries that opened it and then only probes, at least ~1 s apart; no job
// is dead-lettered or dropped while held, and every job is delivered once
// it heals.
func TestBreakerHoldsThroughOutage(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	healAt := downUntilHealed(ds, http.StatusBadGateway)
	in := startDaemon(t, srv, baseConfig(lane("api", "20/s", 100, `    breaker: { failures: 3, open_for: 1s, max_open_for: 2s }
    retry: { max_attempts: 10, initial_backoff: 100ms, max_backoff: 500ms }
    dead_letter: dead.api
`, ds.URL)))
	dead := subscribeDead(t, in.nc, "dead.api")
	const jobs = 20
	start := time.Now()
	healAt.Store(start.Add(6 * time.Second).UnixNano())
	for i := range jobs {
		if r := in.request(t, "shaper.jobs.api", fmt.Appendf(nil, "job %d", i), nil); r.Status != "accepted" {
			t.Fatalf("job %d: %+v", i, r)
		}
	}
	waitBreaker(t, in, "api", "open", 5*time.Second)
	if got := in.metric(t, `shaper_breaker_open{downstream="api"}`); got != 1 {
		t.Errorf("shaper_breaker_open = %v while held, want 1", got)
	}
	deadline := time.Now().Add(30 * time.Second)
	for in.metric(t, `shaper_jobs_delivered_total{downstream="api",outcome="success"}`) < jobs {
		if time.Now().After(deadline) {
			t.Fatalf("not every job delivered within 30 s of the outage's start")
		}
		time.Sleep(100 * time.Millisecond)
	}

	heal := time.Unix(0, healAt.Load())
	var failed []time.Duration
	for _, h := range ds.snapshot() {
		if h.at.Before(heal) {
			failed = append(failed, h.at.Sub(start))
		}
	}
	// 3 tries open it; then probes at about 1, 3 and 5 s (1 s, then 2 s, 2 s).
	if len(failed) < 4 || len(failed) > 8 {
		t.Errorf("%d tries reached the dead downstream, want 3 plus the probes (about 6): %v", len(failed), failed)
	}
	for i := 4; i < len(failed); i++ {
		if gap := failed[i] - failed[i-1]; gap < 900*time.Millisecond {
			t.Errorf("tries %d and %d only %v apart while held: %v", i-1, i, gap, failed)
		}
	}
	select {
	case m := <-dead:
		t.Errorf("dead letter while held: %s %q", m.Header.Get("Shaper-Reason"), m.Data)
	default:
	}
	for _, series := range []string{
		`shaper_jobs_delivered_total{downstream="api",outcome="dead_lettered"}`,
		`shaper_jobs_dropped_total{downstream="api",reason="expired"}`,
	} {
		if got := in.metric(t, series); got != 0 {
			t.Errorf("%s = %v, want 0", series, got)
		}
	}
	if got := in.metric(t, `shaper_breaker_trips_total{downstream="api"}`); got != 1 {
		t.Errorf("trips = %v, want 1", got)
	}
	if got := in.metric(t, `shaper_breaker_open{downstream="api"}`); got != 0 {
		t.Errorf("shaper_breaker_open = %v after healing, want 0", got)
	}
	waitBreaker(t, in, "api", "closed", time.Second)
}

// waitBreaker polls GET /v1/downstreams until downstream's breaker is state.
func waitBreaker(t *testing.T, in *instance, downstream, state string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	last := ""
	for {
		var list struct {
			Downstreams []struct {
				Name    string `json:"name"`
				Breaker string `json:"breaker"`
			} `json:"downstreams"`
		}
		if err := json.Unmarshal([]byte(in.get(t, "/v1/downstreams", http.StatusOK)), &list); err != nil {
			t.Fatal(err)
		}
		for _, d := range list.Downstreams {
			if d.Name == downstream {
				last = d.Breaker
			}
		}
		if last == state || (state == "open" && last == "half_open") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("breaker of %s is %q, want %q within %s", downstream, last, state, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestOutageUnderDefaults: 30 jobs queued for a downstream that answers 503
// (no Retry-After) for 20 s, then heals; the downstream has no breaker or
// retry key, so the defaults apply (breaker 5 failures, 5 s doubling to
// 5 m; 5 attempts from 1 s). On either backend no job is dead-lettered or
// dropped, and all 30 are delivered once the downstream is back. (With
// the breaker off, the default retries dead-lettered 27 of the 30.)
//
// The two backends run side by side in the test's own slot, not as
// parallel subtests: those would wait for slots behind every other test,
// and this one, which waits ~38 s on the breaker's probes, would end last.
func TestOutageUnderDefaults(t *testing.T) {
	t.Parallel()
	var both sync.WaitGroup
	defer both.Wait()
	for _, backend := range []string{"memory", "jetstream"} {
		both.Go(func() { t.Run(backend, func(t *testing.T) { outageUnderDefaults(t, backend) }) })
	}
}

// outageUnderDefaults is TestOutageUnderDefaults on one backend.
func outageUnderDefaults(t *testing.T, backend string) {
	srv := runNATS(t)
	ds := newDownstream(t)
	healAt := downUntilHealed(ds, http.StatusServiceUnavailable)
	block := strings.Replace(lane("api", "10/s", 100, "    dead_letter: dead.api\n", ds.URL),
		"backend: memory", "backend: "+backend, 1)
	in := startDaemon(t, srv, baseConfig(block))
	dead := subscribeDead(t, in.nc, "dead.api")
	const jobs = 30
	healAt.Store(time.Now().Add(20 * time.Second).UnixNano())
	for i := range jobs {
		if r := in.request(t, "shaper.jobs.api", fmt.Appendf(nil, "job %d", i), nil); r.Status != "accepted" {
			t.Fatalf("job %d: %+v", i, r)
		}
	}
	waitBreaker(t, in, "api", "open", 5*time.Second)
	// Probes at about 5, 15 and 35 s; the one after the outage
	// closes the breaker and the queue drains at 10/s.
	deadline := time.Now().Add(90 * time.Second)
	for in.metric(t, `shaper_jobs_delivered_total{downstream="api",outcome="success"}`) < jobs {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for series, want := range map[string]float64{
		`shaper_jobs_delivered_total{downstream="api",outcome="success"}`:       jobs,
		`shaper_jobs_delivered_total{downstream="api",outcome="dead_lettered"}`: 0,
		`shaper_jobs_delivered_total{downstream="api",outcome="failed"}`:        0,
		`shaper_jobs_dropped_total{downstream="api",reason="expired"}`:          0,
	} {
		if got := in.metric(t, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	select {
	case m := <-dead:
		t.Errorf("dead letter: %s %q", m.Header.Get("Shaper-Reason"), m.Data)
	default:
	}
	waitBreaker(t, in, "api", "closed", time.Second)
}

// downUntilHealed makes ds answer code until the instant stored in the
// returned value (unix ns; 0, as it starts: not yet set, down), then 200.
func downUntilHealed(ds *downstream, code int) *atomic.Int64 {
	var healAt atomic.Int64
	ds.respond = func(int, *http.Request) (int, map[string]string) {
		if at := healAt.Load(); at == 0 || time.Now().UnixNano() < at {
			return code, nil
		}
		return http.StatusOK, nil
	}
	return &healAt
}
