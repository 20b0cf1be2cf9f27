package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
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

// natsOptions are a test NATS server's options: JetStream on, a random
// port, the store in t.TempDir(). A test that restarts the server keeps them.
func natsOptions(t testing.TB) server.Options {
	opts := natsserver.DefaultTestOptions
	opts.Port = -1
	opts.JetStream = true
	opts.StoreDir = t.TempDir()
	return opts
}

// runNATS starts a NATS server with JetStream on a random port.
func runNATS(t testing.TB) *server.Server {
	t.Helper()
	opts := natsOptions(t)
	srv := natsserver.RunServer(&opts)
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv
}

// instance is one daemon under test.
type instance struct {
	d      *daemon.Daemon
	nc     *nats.Conn // a producer's connection
	admin  string     // http://host:port
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// startDaemon writes yaml (with %NATS% replaced by the server's URL) to a
// file, loads it through config.Load as shaperd does, and runs the daemon.
func startDaemon(t testing.TB, srv *server.Server, yaml string) *instance {
	t.Helper()
	in, _ := startDaemonOpts(t, srv, yaml, daemon.Options{})
	return in
}

// startDaemonOpts is startDaemon with daemon options; unless opts sets a
// Logger, the daemon's warnings go to the test log and are kept in logs.
func startDaemonOpts(t testing.TB, srv *server.Server, yaml string, opts daemon.Options) (*instance, *capturedLog) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shaper.yaml")
	yaml = strings.ReplaceAll(yaml, "%NATS%", srv.ClientURL())
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	logs := &capturedLog{}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logs, testWriter{t}), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	d, err := daemon.New(cfg, opts)
	if err != nil {
		t.Fatalf("daemon.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{d: d, cancel: cancel, done: make(chan error, 1)}
	go func() { in.done <- d.Run(ctx) }()
	select {
	case <-d.Ready():
	case err := <-in.done:
		t.Fatalf("daemon stopped before ready: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("daemon not ready within 20s")
	}
	in.admin = "http://" + d.AdminAddr()
	in.nc, err = nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.nc.Close(); in.stop(t) })
	return in, logs
}

// capturedLog collects log output from the daemon's goroutines.
type capturedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *capturedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *capturedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// stop shuts the daemon down and waits for Run to return (idempotent).
func (in *instance) stop(t testing.TB) {
	t.Helper()
	in.once.Do(func() {
		in.cancel()
		select {
		case err := <-in.done:
			if err != nil {
				t.Errorf("daemon Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("daemon did not stop within 30s")
		}
	})
}

// reply is a decoded daemon reply.
type reply struct {
	Status     string  `json:"status"`
	Downstream string  `json:"downstream"`
	JobID      string  `json:"job_id"`
	Duplicate  bool    `json:"duplicate"`
	Position   int     `json:"position"`
	ETASeconds float64 `json:"eta_seconds"`
	Paused     bool    `json:"paused"`
	NotBefore  string  `json:"not_before"`
	Reason     string  `json:"reason"`
	RetryAfter int     `json:"retry_after_seconds"`
	Error      string  `json:"error"`
	Header     nats.Header
	Body       string // as received
}

// request sends one job by request/reply and decodes the answer.
func (in *instance) request(t *testing.T, subject string, payload []byte, hdr map[string]string) reply {
	t.Helper()
	m := nats.NewMsg(subject)
	m.Data = payload
	for k, v := range hdr {
		m.Header.Set(k, v)
	}
	resp, err := in.nc.RequestMsg(m, 10*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	var r reply
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		t.Fatalf("reply body %q: %v", resp.Data, err)
	}
	r.Header, r.Body = resp.Header, string(resp.Data)
	if got := resp.Header.Get("Shaper-Status"); got != r.Status {
		t.Fatalf("Shaper-Status header %q != body status %q", got, r.Status)
	}
	return r
}

// downstream is a real HTTP server that records every request.
type downstream struct {
	*httptest.Server
	mu       sync.Mutex
	hits     []hit
	inflight int
	maxIn    int
	respond  func(n int, r *http.Request) (status int, hdr map[string]string) // n counts from 1
	delay    time.Duration
}

type hit struct {
	at      time.Time
	path    string
	body    string
	jobID   string
	attempt int
	idem    string
	header  http.Header
}

func newDownstream(t testing.TB) *downstream {
	ds := &downstream{}
	ds.Server = httptest.NewServer(http.HandlerFunc(ds.serve))
	t.Cleanup(ds.Close)
	return ds
}

func (ds *downstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	attempt, _ := strconv.Atoi(r.Header.Get("Shaper-Attempt"))
	ds.mu.Lock()
	ds.hits = append(ds.hits, hit{at: time.Now(), path: r.URL.Path, body: string(body), jobID: r.Header.Get("Shaper-Job-Id"),
		attempt: attempt, idem: r.Header.Get("Idempotency-Key"), header: r.Header.Clone()})
	n := len(ds.hits)
	ds.inflight++
	ds.maxIn = max(ds.maxIn, ds.inflight)
	respond, delay := ds.respond, ds.delay
	ds.mu.Unlock()
	defer func() { ds.mu.Lock(); ds.inflight--; ds.mu.Unlock() }()
	if delay > 0 {
		time.Sleep(delay)
	}
	status := http.StatusOK
	if respond != nil {
		var hdr map[string]string
		status, hdr = respond(n, r)
		for k, v := range hdr {
			w.Header().Set(k, v)
		}
	}
	w.WriteHeader(status)
}

func (ds *downstream) snapshot() []hit {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	return append([]hit(nil), ds.hits...)
}

// waitHits waits until the downstream has seen n requests.
func (ds *downstream) waitHits(t testing.TB, n int, within time.Duration) []hit {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		h := ds.snapshot()
		if len(h) >= n {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("downstream saw %d requests, want %d within %s", len(h), n, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// metric returns the value of one series from /metrics, e.g.
// `shaper_jobs_rejected_total{downstream="printer",reason="queue_full"}`.
func (in *instance) metric(t *testing.T, series string) float64 {
	t.Helper()
	body := in.get(t, "/metrics", http.StatusOK)
	for _, line := range strings.Split(body, "\n") {
		name, val, ok := strings.Cut(line, " ")
		if ok && name == series {
			f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", series, err)
			}
			return f
		}
	}
	t.Fatalf("metric %s not exported", series)
	return 0
}

// metricReaches polls series until it equals want or 10 s pass, and returns
// the last value read. Use it for a count booked after the event the test
// saw: a dead letter is published before its outcome is counted, so a
// subscriber can hold it while /metrics still shows the count before.
func (in *instance) metricReaches(t *testing.T, series string, want float64) float64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := in.metric(t, series)
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (in *instance) get(t *testing.T, path string, want int) string {
	t.Helper()
	return in.do(t, http.MethodGet, path, want)
}

func (in *instance) do(t *testing.T, method, path string, want int) string {
	t.Helper()
	req, _ := http.NewRequest(method, in.admin+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, b)
	}
	return string(b)
}

// subscribeDead collects dead letters.
func subscribeDead(t *testing.T, nc *nats.Conn, subject string) chan *nats.Msg {
	t.Helper()
	ch := make(chan *nats.Msg, 1024)
	sub, err := nc.ChanSubscribe(subject, ch)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return ch
}

func recvMsg(t *testing.T, ch chan *nats.Msg, within time.Duration) *nats.Msg {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(within):
		t.Fatalf("no message within %s", within)
		return nil
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// lane renders one downstream's YAML block.
func lane(name, rate string, capacity int, extra string, url string) string {
	return fmt.Sprintf(`
  %s:
    rate: %s
    queue: { capacity: %d, backend: memory }
    sink:
      http: { url: %q, timeout: 2s }
%s`, name, rate, capacity, url, extra)
}

// baseConfig is a config with the given downstream blocks.
func baseConfig(lanes ...string) string {
	return `
nats: { url: "%NATS%" }
admin: { listen: "127.0.0.1:0" }
shutdown_grace: 2s
downstreams:` + strings.Join(lanes, "")
}

// httpGet returns the status code of a GET.
func httpGet(url string) (int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
