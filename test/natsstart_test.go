package test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
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

// NATS unreachable at start: the daemon starts anyway, says so in one log
// line, /readyz is 503 naming NATS and the durable queue, and once NATS
// comes up it connects, creates the stream and takes jobs, with no restart.
func TestNATSUnreachableAtStart(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	ds := newDownstream(t)
	path := filepath.Join(t.TempDir(), "s.yaml")
	yaml := `
nats: { url: "nats://` + addr + `" }
admin: { listen: "127.0.0.1:0" }
downstreams:` + strings.Replace(lane("printer", "20/s", 10, "", ds.URL), "backend: memory", "backend: jetstream", 1)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	logs := &capturedLog{}
	d, err := daemon.New(cfg, daemon.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	select {
	case <-d.Ready():
	case err := <-done:
		t.Fatalf("daemon gave up without NATS: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("not started within 20 s")
	}
	admin := "http://" + d.AdminAddr()
	status, problems := readyz(t, admin)
	if status != 503 || !strings.Contains(problems, "NATS not connected") || !strings.Contains(problems, "queue printer") {
		t.Fatalf("/readyz %d %s; want 503 naming NATS and the queue", status, problems)
	}
	if !strings.Contains(logs.String(), "NATS not reachable yet") {
		t.Errorf("no log line says NATS is unreachable:\n%s", logs.String())
	}

	opts := natsOptions(t)
	opts.Host = host
	opts.Port = atoi(t, port)
	up := time.Now()
	srv := natsserver.RunServer(&opts)
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	waitFor(t, 15*time.Second, func() bool { s, _ := readyz(t, admin); return s == 200 }, "ready once NATS is up")
	t.Logf("ready %s after NATS came up", time.Since(up).Round(time.Millisecond))

	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	resp, err := nc.Request("shaper.jobs.printer", []byte("x"), 5*time.Second)
	if err != nil || resp.Header.Get("Shaper-Status") != "accepted" {
		t.Fatalf("after NATS came up: %v %v %s", err, resp.Header, resp.Data)
	}
	ds.waitHits(t, 1, 5*time.Second)
}

func readyz(t *testing.T, admin string) (int, string) {
	t.Helper()
	resp, err := http.Get(admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v struct {
		Problems []string `json:"problems"`
	}
	_ = json.Unmarshal(b, &v)
	return resp.StatusCode, strings.Join(v.Problems, "; ")
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("not a port: %q", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}
