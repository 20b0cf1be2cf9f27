package test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestOutageUnderDefaults: 30 jobs queued for a downstream that answers 503
// (no Retry-After) for 20 s, then heals; the downstream has no breaker or
// retry key, so the defaults apply (breaker 5 failures, 5 s doubling to
// 5 m; 5 attempts from 1 s). On either backend no job is dead-lettered or
// dropped, and all 30 are delivered once the downstream is back. (With
// the breaker off, the default retries dead-lettered 27 of the 30.)
func TestOutageUnderDefaults(t *testing.T) {
	for _, backend := range []string{"memory", "jetstream"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			srv := runNATS(t)
			ds := newDownstream(t)
			var healAt atomic.Int64 // unix ns; 0 = not set yet: down
			ds.respond = func(int, *http.Request) (int, map[string]string) {
				if at := healAt.Load(); at == 0 || time.Now().UnixNano() < at {
					return http.StatusServiceUnavailable, nil
				}
				return http.StatusOK, nil
			}
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
		})
	}
}
