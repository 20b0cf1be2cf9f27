package test

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/cmd/shaperd/daemon"
	"github.com/shaperd/shaper/config"
)

// Secrets — the NATS password and a sink's Authorization header — appear in
// no log line (debug included), no metric and no /v1 output, through start,
// a failing delivery, a refused reload and shutdown.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	const password, sinkSecret = "s3cret-nats-pw", "Bearer s3cret-sink-token"
	opts := natsserver.DefaultTestOptions
	opts.Port = -1
	opts.Username, opts.Password = "shaper", password
	srv := natsserver.RunServer(&opts)
	t.Cleanup(srv.Shutdown)

	ds := newDownstream(t)
	ds.respond = func(int, *http.Request) (int, map[string]string) { return 500, nil }
	yaml := `
nats: { url: "nats://shaper:` + password + `@` + srv.Addr().String() + `" }
admin: { listen: "127.0.0.1:0" }
downstreams:
  erp:
    rate: 50/s
    queue: { capacity: 10, backend: memory }
    sink:
      http: { url: "` + ds.URL + `", headers: { Authorization: "` + sinkSecret + `" } }
    retry: { max_attempts: 2, initial_backoff: 10ms, max_backoff: 10ms }
`
	path := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	logs := &capturedLog{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := daemon.New(cfg, daemon.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-d.Ready():
	case err := <-done:
		done <- err // for the deferred wait
		t.Fatalf("daemon stopped before it was ready: %v", err)
	}
	in := &instance{d: d, admin: "http://" + d.AdminAddr()}
	in.nc, err = nats.Connect(srv.ClientURL(), nats.UserInfo("shaper", password))
	if err != nil {
		t.Fatal(err)
	}
	defer in.nc.Close()

	in.request(t, "shaper.jobs.erp", []byte("x"), nil)
	hits := ds.waitHits(t, 2, 5*time.Second)
	if hits[0].header.Get("Authorization") != sinkSecret {
		t.Fatalf("the configured header did not reach the downstream: %v", hits[0].header)
	}
	_ = d.Reload(func() (config.Config, error) { return config.Load(path + ".missing") })
	exposed := in.get(t, "/metrics", 200) + in.get(t, "/v1/downstreams", 200)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	for _, secret := range []string{password, "s3cret-sink-token"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("a log line carries the secret %q", secret)
		}
		if strings.Contains(exposed, secret) {
			t.Errorf("/metrics or /v1 carries the secret %q", secret)
		}
	}
	if !strings.Contains(logs.String(), "redacted") {
		t.Errorf("the NATS URL was not logged redacted:\n%s", logs.String())
	}
}
