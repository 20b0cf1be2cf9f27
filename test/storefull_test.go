package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// storeFullConfig is a daemon with an embedded NATS server whose
// JetStream store is small (nats.embedded.max_store 4MiB) and one
// jetstream downstream that tries each job once.
func storeFullConfig(t *testing.T, natsAddr, url string) string {
	return fmt.Sprintf(`
nats:
  embedded: { listen: %q, store_dir: %q, max_store: 4MiB }
admin: { listen: "%%ADMIN%%" }
ingress: { max_payload: 64KiB }
shutdown_grace: 2s
downstreams:
  printer:
    rate: 50/s
    queue: { capacity: 100000 }
    sink: { http: { url: %q, timeout: 2s } }
    retry: { max_attempts: 1 }
    breaker: { failures: 0 }
`, natsAddr, t.TempDir(), url)
}

// storeFull reads printer's store_full field from /v1/downstreams.
func storeFull(t *testing.T, admin string) bool {
	t.Helper()
	resp, err := http.Get(admin + "/v1/downstreams")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Downstreams []map[string]any `json:"downstreams"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	for _, d := range v.Downstreams {
		if d["name"] == "printer" {
			full, ok := d["store_full"].(bool)
			if !ok {
				t.Fatalf("no store_full field in %v", d)
			}
			return full
		}
	}
	t.Fatal("no downstream printer")
	return false
}

// A full store, as an operator sees it: a paused downstream's jobs fill the
// queue's share of a small embedded store; intake then answers unavailable
// with a plain out-of-space error (not the store's raw answer), the metric
// and the /v1 field say so and one log line does. Once the downstream runs
// again, jobs that fail for good are still dead-lettered (the dead letters
// keep room of their own), the others are delivered, and intake accepts
// again without a restart: the metric goes back to 0 and one line says so.
func TestStoreFullAnswersPlainlyAndRecovers(t *testing.T) {
	t.Parallel()
	var failing atomic.Int32 // the next this many tries fail
	ds := newDownstream(t)
	ds.respond = func(int, *http.Request) (int, map[string]string) {
		if failing.Add(-1) >= 0 {
			return http.StatusInternalServerError, nil
		}
		return http.StatusOK, nil
	}
	natsAddr := freeAddr(t)
	p := startShaperd(t, storeFullConfig(t, natsAddr, ds.URL))
	nc, err := nats.Connect("nats://" + natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	p.post(t, "/v1/downstreams/printer/pause")

	payload := []byte(strings.Repeat("x", 30<<10))
	accepted, full := 0, reply{}
	for i := 0; i < 400; i++ {
		r := submitTo(t, nc, "printer", payload)
		if r.Status == "accepted" {
			accepted++
			continue
		}
		full = r
		break
	}
	if full.Status == "" {
		t.Fatalf("400 jobs of 30KiB all accepted into a 4MiB store")
	}
	t.Logf("accepted %d jobs of 30KiB, then: %+v", accepted, full)
	if full.Reason != "unavailable" || !strings.Contains(full.Error, "the store is out of space") ||
		strings.Contains(full.Error, "err_code") || strings.Contains(full.Error, "API error") || full.RetryAfter < 1 {
		t.Fatalf("answer when the store is full: %+v; want unavailable, a plain out-of-space error, Retry-After >= 1", full)
	}
	if r := submitTo(t, nc, "printer", payload); r.Reason != "unavailable" {
		t.Fatalf("second job while full: %+v", r)
	}
	if got := procMetric(t, p.admin, `shaper_store_full{downstream="printer"}`); got != 1 {
		t.Fatalf("shaper_store_full = %v while full, want 1", got)
	}
	if !storeFull(t, p.admin) {
		t.Fatal("/v1/downstreams store_full = false while full")
	}
	if n := strings.Count(p.stderr.String(), "queue store is out of space"); n != 1 {
		t.Fatalf("%d log lines for one out-of-space episode, want 1:\n%s", n, p.stderr.String())
	}

	failing.Store(10) // the first ten fail for good: dead letters in a full store
	p.post(t, "/v1/downstreams/printer/resume")
	deadline := time.Now().Add(30 * time.Second)
	for procMetric(t, p.admin, `shaper_jobs_delivered_total{downstream="printer",outcome="success"}`) < float64(accepted-10) {
		if time.Now().After(deadline) {
			t.Fatalf("queued jobs not delivered within 30s:\n%s", p.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := procMetric(t, p.admin, `shaper_jobs_delivered_total{downstream="printer",outcome="dead_lettered"}`); got != 10 {
		t.Fatalf("dead-lettered %v jobs, want 10", got)
	}
	if got := procMetric(t, p.admin, `shaper_dead_letter_store_errors_total{downstream="printer"}`); got != 0 {
		t.Fatalf("%v dead letters could not be stored", got)
	}
	if got := procMetric(t, p.admin, `shaper_dead_letters{downstream="printer"}`); got != 10 {
		t.Errorf("shaper_dead_letters = %v, want 10 stored", got)
	}

	if r := submitTo(t, nc, "printer", payload); r.Status != "accepted" {
		t.Fatalf("after the queue drained: %+v, want accepted without a restart", r)
	}
	if got := procMetric(t, p.admin, `shaper_store_full{downstream="printer"}`); got != 0 {
		t.Fatalf("shaper_store_full = %v after recovery, want 0", got)
	}
	if storeFull(t, p.admin) {
		t.Fatal("/v1/downstreams store_full = true after recovery")
	}
	if !strings.Contains(p.stderr.String(), "queue store has room again") {
		t.Fatalf("no log line for the end of the episode:\n%s", p.stderr.String())
	}
}
