package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestKeyConcurrency: a downstream at 20/s with concurrency 4 and
// queue.key_concurrency 1. A slow tenant's 5 jobs (the downstream holds
// each 1 s) are sent before a fast tenant's 20: the slow tenant never has
// more than 1 request in flight, the fast tenant's jobs start at the rate
// meanwhile instead of waiting behind the slow ones, and every job is
// delivered once. On both backends: on jetstream the drainer holds the
// slow tenant's fetched jobs while it hands out the fast one's.
func TestKeyConcurrency(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"memory", "jetstream"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			keyConcurrency(t, backend)
		})
	}
}

func keyConcurrency(t *testing.T, backend string) {
	const slow, fast = 5, 20
	srv := runNATS(t)
	ds := newDownstream(t)
	var (
		mu               sync.Mutex
		slowIn, slowPeak int
		slowTries        int
	)
	ds.respond = func(n int, _ *http.Request) (int, map[string]string) {
		if !strings.HasPrefix(ds.snapshot()[n-1].body, "slow") {
			return http.StatusOK, nil
		}
		mu.Lock()
		slowIn++
		slowTries++
		slowPeak = max(slowPeak, slowIn)
		mu.Unlock()
		time.Sleep(time.Second)
		mu.Lock()
		slowIn--
		mu.Unlock()
		return http.StatusOK, nil
	}
	lane := fmt.Sprintf(`
  api:
    rate: 20/s
    concurrency: 4
    queue: { capacity: 100, backend: %s, key_concurrency: 1 }
    sink:
      http: { url: %q, timeout: 5s }
`, backend, ds.URL)
	in := startDaemon(t, srv, baseConfig(lane))
	send := func(key, body string) {
		r := in.request(t, "shaper.jobs.api", []byte(body), map[string]string{"Shaper-Key": key})
		if r.Status != "accepted" {
			t.Fatalf("job %s: %+v", body, r)
		}
	}
	for i := range slow {
		send("slow", fmt.Sprint("slow", i))
	}
	for i := range fast {
		send("fast", fmt.Sprint("fast", i))
	}
	hits := ds.waitHits(t, slow+fast, 9*time.Second)
	var first, lastFast time.Time
	seen := map[string]int{}
	for _, h := range hits {
		seen[h.body]++
		if first.IsZero() {
			first = h.at
		}
		if strings.HasPrefix(h.body, "fast") {
			lastFast = h.at
		}
	}
	for i := range slow {
		if b := fmt.Sprint("slow", i); seen[b] != 1 {
			t.Errorf("%s delivered %d times, want 1", b, seen[b])
		}
	}
	for i := range fast {
		if b := fmt.Sprint("fast", i); seen[b] != 1 {
			t.Errorf("%s delivered %d times, want 1", b, seen[b])
		}
	}
	// 21 starts at 20/s take about 1 s; the slow tenant holding the
	// slots would hold the fast one back by a second each round.
	if d := lastFast.Sub(first); d > 2*time.Second {
		t.Errorf("the fast tenant's last job started %s after the first start, want about 1 s (at the rate)", d)
	}
	time.Sleep(1100 * time.Millisecond) // the last slow request ends
	mu.Lock()
	peak, tries := slowPeak, slowTries
	mu.Unlock()
	if peak != 1 || tries != slow {
		t.Errorf("slow tenant: %d in flight at most, %d tries; want 1 and %d", peak, tries, slow)
	}
	var list struct {
		Downstreams []struct {
			KeyConcurrency int `json:"key_concurrency"`
			Inflight       int `json:"inflight"`
		} `json:"downstreams"`
	}
	if err := json.Unmarshal([]byte(in.get(t, "/v1/downstreams", http.StatusOK)), &list); err != nil || len(list.Downstreams) != 1 {
		t.Fatalf("/v1/downstreams: %v %+v", err, list)
	}
	if got := list.Downstreams[0].KeyConcurrency; got != 1 {
		t.Errorf("/v1/downstreams key_concurrency = %d, want 1", got)
	}
}
