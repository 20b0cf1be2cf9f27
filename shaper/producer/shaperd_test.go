package producer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/cmd/shaperd/daemon"
	"github.com/shaperd/shaper/config"
)

// shaperd is a real daemon for the tests and examples: an in-process NATS
// server with JetStream in a temporary directory, cmd/shaperd/daemon on it,
// and an HTTP downstream that answers 200 and keeps what it got.
type shaperd struct {
	srv  *server.Server
	URL  string // the NATS server's
	down *downstream
	stop func()
}

// downstream records the requests the daemon delivers.
type downstream struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []delivered
}

type delivered struct {
	header http.Header
	body   string
}

func (d *downstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	d.mu.Lock()
	d.reqs = append(d.reqs, delivered{r.Header.Clone(), string(body)})
	d.mu.Unlock()
}

// wait returns the first n deliveries, or fewer after 10 s.
func (d *downstream) wait(n int) []delivered {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		d.mu.Lock()
		got := append([]delivered(nil), d.reqs...)
		d.mu.Unlock()
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
	}
}

// startShaperd runs a daemon with the config text cfg, in which %NATS% is
// the server's URL and %DOWN% the downstream's. log gets the daemon's
// warnings (nil: discarded).
func startShaperd(cfg string, log io.Writer) (*shaperd, error) {
	dir, err := os.MkdirTemp("", "producer-test-")
	if err != nil {
		return nil, err
	}
	opts := natsserver.DefaultTestOptions
	opts.Port, opts.JetStream, opts.StoreDir = -1, true, filepath.Join(dir, "nats")
	srv := natsserver.RunServer(&opts)
	down := &downstream{}
	down.Server = httptest.NewServer(down)
	cleanup := func() { down.Close(); srv.Shutdown(); srv.WaitForShutdown(); os.RemoveAll(dir) }
	d, err := newDaemon(dir, strings.NewReplacer("%NATS%", srv.ClientURL(), "%DOWN%", down.URL).Replace(cfg), log)
	if err != nil {
		cleanup()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-d.Ready():
	case err := <-done:
		cancel()
		cleanup()
		return nil, fmt.Errorf("daemon stopped before ready: %w", err)
	case <-time.After(20 * time.Second):
		cancel()
		cleanup()
		return nil, errors.New("daemon not ready within 20s")
	}
	stop := func() { cancel(); <-done; cleanup() }
	return &shaperd{srv: srv, URL: srv.ClientURL(), down: down, stop: stop}, nil
}

func newDaemon(dir, cfg string, log io.Writer) (*daemon.Daemon, error) {
	path := filepath.Join(dir, "shaper.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	c, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = io.Discard
	}
	logger := slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return daemon.New(c, daemon.Options{Logger: logger})
}

// daemonConfig is a daemon config with the given downstream blocks.
func daemonConfig(lanes ...string) string {
	return `
nats: { url: "%NATS%" }
admin: { listen: "127.0.0.1:0" }
shutdown_grace: 2s
downstreams:` + strings.Join(lanes, "")
}

// lane renders a downstream with an in-memory queue that delivers to the
// test's HTTP downstream: queue holds the queue's keys ("capacity: 10"),
// extra more of the downstream's, as YAML lines indented four spaces.
func lane(name, rate, queue, extra string) string {
	return fmt.Sprintf(`
  %s:
    rate: %s
    queue: { %s, backend: memory }
    sink: { http: { url: "%%DOWN%%", timeout: 2s } }
%s`, name, rate, queue, extra)
}

// testShaperd starts a daemon for t and connects a producer to it.
func testShaperd(t *testing.T, cfg string) (*shaperd, *nats.Conn) {
	t.Helper()
	d, err := startShaperd(cfg, testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	nc, err := nats.Connect(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return d, nc
}

// runNATS starts a bare NATS server (no daemon) for t and connects to it.
func runNATS(t *testing.T) *nats.Conn {
	t.Helper()
	opts := natsserver.DefaultTestOptions
	opts.Port = -1
	srv := natsserver.RunServer(&opts)
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
