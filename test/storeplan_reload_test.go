package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// planReloadConfig is a daemon with a small embedded store (4MiB) and
// jetstream downstreams a, failing every job once into a dead letter, and
// (with withB) b, whose sink is never reached.
func planReloadConfig(natsAddr, storeDir, adminAddr, url string, withB bool) string {
	yaml := fmt.Sprintf(`
nats:
  embedded: { listen: %q, store_dir: %q, max_store: 4MiB }
admin: { listen: %q }
ingress: { max_payload: 64KiB }
shutdown_grace: 2s
downstreams:
  a:
    rate: 50/s
    queue: { capacity: 1000 }
    sink: { http: { url: %q, timeout: 2s } }
    retry: { max_attempts: 1 }
    breaker: { failures: 0 }
`, natsAddr, storeDir, adminAddr, url)
	if withB {
		yaml += fmt.Sprintf(`  b:
    rate: 50/s
    queue: { capacity: 1000 }
    sink: { http: { url: %q, timeout: 2s } }
`, url)
	}
	return yaml
}

// streamMaxBytes is the max_bytes of each of the daemon's streams by name.
func streamMaxBytes(t *testing.T, nc *nats.Conn) map[string]int64 {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := map[string]int64{}
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = s.CachedInfo().Config.MaxBytes
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A jetstream downstream added by a reload gets its share of a bounded
// store like one there at start: its queue and dead-letter streams are
// bounded, the others' shares shrink so that the bounds still add up to
// at most the store, and once the new downstream's queue is full another
// downstream's jobs are still accepted and its dead letters stored. A
// share the server cannot reserve room for is not applied: the stream
// keeps its bound.
func TestReloadSharesTheStore(t *testing.T) {
	t.Parallel()
	ds := newDownstream(t)
	ds.respond = func(_ int, r *http.Request) (int, map[string]string) {
		return http.StatusInternalServerError, nil
	}
	natsAddr, adminAddr, storeDir := freeAddr(t), freeAddr(t), t.TempDir()
	path := filepath.Join(t.TempDir(), "shaper.yaml")
	if err := os.WriteFile(path, []byte(planReloadConfig(natsAddr, storeDir, adminAddr, ds.URL, false)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startShaperdFile(t, path, adminAddr)
	nc, err := nats.Connect("nats://" + natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	if err := os.WriteFile(path, []byte(planReloadConfig(natsAddr, storeDir, adminAddr, ds.URL, true)), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, 10*time.Second, func() bool { return strings.Contains(p.stderr.String(), "config reloaded") }, "the reload")
	p.post(t, "/v1/downstreams/b/pause")

	const limit = 4 << 20
	var bounds map[string]int64
	waitFor(t, 10*time.Second, func() bool {
		bounds = streamMaxBytes(t, nc)
		return bounds["SHAPER_b"] > 0 && bounds["SHAPER_DEAD_b"] > 0 && bounds["SHAPER_a"] > 0 && bounds["SHAPER_DEAD_a"] > 0 &&
			bounds["SHAPER_a"]+bounds["SHAPER_b"]+bounds["SHAPER_DEAD_a"]+bounds["SHAPER_DEAD_b"] <= limit
	}, "every stream bounded within the store")
	t.Logf("max_bytes after the reload: %v", bounds)

	payload := []byte(strings.Repeat("x", 60<<10))
	accepted, refused := 0, reply{}
	for range 200 {
		r := submitTo(t, nc, "b", payload)
		if r.Status != "accepted" {
			refused = r
			break
		}
		accepted++
	}
	if refused.Status == "" {
		t.Fatal("200 jobs of 60KiB all accepted into b's share of a 4MiB store")
	}
	t.Logf("b took %d jobs of 60KiB, then: %+v", accepted, refused)
	if r := submitTo(t, nc, "a", payload); r.Status != "accepted" {
		t.Fatalf("a's job once b is full: %+v, want accepted:\n%s", r, p.stderr.String())
	}
	waitFor(t, 10*time.Second, func() bool {
		return procMetric(t, p.admin, `shaper_dead_letters{downstream="a"}`) == 1
	}, "a's dead letter stored")
	if got := procMetric(t, p.admin, `shaper_dead_letter_store_errors_total{downstream="a"}`); got != 0 {
		t.Fatalf("%v of a's dead letters could not be stored", got)
	}

	// b removed: its streams stay, holding the room the server reserved
	// for their bounds, so a cannot take its larger share back; it keeps
	// its bound, logged, and still takes jobs.
	if err := os.WriteFile(path, []byte(planReloadConfig(natsAddr, storeDir, adminAddr, ds.URL, false)), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, 10*time.Second, func() bool { return strings.Count(p.stderr.String(), "config reloaded") == 2 }, "the second reload")
	if !strings.Contains(p.stderr.String(), "stream keeps its byte bound") {
		t.Errorf("no log line says a keeps its bound:\n%s", p.stderr.String())
	}
	if got := streamMaxBytes(t, nc)["SHAPER_a"]; got != bounds["SHAPER_a"] {
		t.Errorf("a's max_bytes %d after b is removed, want its bound kept: %d", got, bounds["SHAPER_a"])
	}
	if r := submitTo(t, nc, "a", payload); r.Status != "accepted" {
		t.Fatalf("a's job after b is removed: %+v", r)
	}
}

// submitTo sends one job of payload to downstream name and decodes the reply.
func submitTo(t *testing.T, nc *nats.Conn, name string, payload []byte) reply {
	t.Helper()
	resp, err := nc.Request("shaper.jobs."+name, payload, 10*time.Second)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	var r reply
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		t.Fatalf("reply %q: %v", resp.Data, err)
	}
	return r
}
