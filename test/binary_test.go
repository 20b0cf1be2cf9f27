package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// shaperdBinary builds cmd/shaperd once per test run (TestMain starts the
// build at once, so that it overlaps the first tests).
func shaperdBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(buildShaperd)
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func buildShaperd() {
	dir, err := os.MkdirTemp("", "shaperd-bin")
	if err != nil {
		buildErr = err
		return
	}
	binPath = filepath.Join(dir, "shaperd")
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	cmd := exec.Command("go", "build", "-o", binPath, "./cmd/shaperd")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		buildErr = fmt.Errorf("go build: %v\n%s", err, out)
	}
}

// runShaperd runs the binary to completion and returns exit code and stderr.
func runShaperd(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(shaperdBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stderr.String()
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "shaper.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestShaperdConfigErrors(t *testing.T) {
	t.Parallel()
	bad := writeFile(t, `
downstreams:
  printer:
    rate: fast
    queue: { capacity: 0, backend: memory }
    sink: { http: { url: "http://127.0.0.1:1/x" } }
`)
	cases := []struct {
		name string
		env  []string
		args []string
		code int
		want []string
	}{
		{"missing file", nil, []string{"-config", "/nonexistent/shaper.yaml"}, 2, []string{"/nonexistent/shaper.yaml"}},
		{"every problem at once", nil, []string{"-config", bad}, 2,
			[]string{"downstreams.printer.rate", `"fast"`, "downstreams.printer.queue.capacity"}},
		{"bad env value", []string{"SHAPER_DOWNSTREAMS_PRINTER_RATE=soon"}, []string{"-check-config", "-config", bad}, 2,
			[]string{"SHAPER_DOWNSTREAMS_PRINTER_RATE"}},
		{"example config is valid", nil, []string{"-check-config", "-config", "../deploy/example.yaml"}, 0, []string{"config OK"}},
		{"unreadable TLS file", []string{"SHAPER_NATS_URL=nats://" + freeAddr(t), "SHAPER_NATS_TLS_CA=/nonexistent/ca.pem"},
			[]string{"-check-config", "-config", "../deploy/example.yaml"}, 2, []string{"nats.tls.ca", `"/nonexistent/ca.pem"`}},
		{"unreadable creds file stops start-up", []string{"SHAPER_NATS_URL=nats://" + freeAddr(t), "SHAPER_NATS_CREDS=/nonexistent/user.creds"},
			[]string{"-config", "../deploy/example.yaml"}, 2, []string{"nats.creds", `"/nonexistent/user.creds"`}},
		{"bad store sync", []string{"SHAPER_NATS_EMBEDDED_SYNC=sometimes"}, []string{"-check-config", "-config", "../deploy/example.yaml"}, 2,
			[]string{"nats.embedded.sync", `"sometimes" is not a sync mode; write always`}},
		{"bad batch stops start-up", []string{"SHAPER_DOWNSTREAMS_PRINTER_BATCH_MAX_JOBS=1", "SHAPER_DOWNSTREAMS_PRINTER_BATCH_ENCODING=xml"},
			[]string{"-config", "../deploy/example.yaml"}, 2,
			[]string{"downstreams.printer.batch.max_jobs: must be 2..10000, got 1", "downstreams.printer.batch.encoding", "json_array, ndjson or multipart"}},
		{"misspelled env key", []string{"SHAPER_DOWNSTREAMS_PRINTER_RAT=5/s"}, []string{"-check-config", "-config", "../deploy/example.yaml"}, 2,
			[]string{"SHAPER_DOWNSTREAMS_PRINTER_RAT", "SHAPER_DOWNSTREAMS_PRINTER_RATE"}},
		{"shaperctl's env is not config", []string{"SHAPER_ADMIN_URL=https://127.0.0.1:9090", "SHAPER_ADMIN_CA=/nonexistent/ca.pem"},
			[]string{"-check-config", "-config", "../deploy/example.yaml"}, 0, []string{"config OK"}},
		{"bad flag", nil, []string{"-bogus"}, 2, []string{"Usage"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := runShaperd(t, tc.env, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// The daemon as a process: SIGHUP applies a new rate, an invalid file is
// refused and the old config stays, SIGTERM dead-letters queued jobs and
// exits 0.
func TestShaperdProcessLifecycle(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	admin := freeAddr(t)
	conf := func(rate string) string {
		return fmt.Sprintf(`
nats: { url: %q }
admin: { listen: %q }
shutdown_grace: 2s
downstreams:
  printer:
    rate: %s
    queue: { capacity: 20, backend: memory }
    sink: { http: { url: %q } }
    dead_letter: dl.printer
`, srv.ClientURL(), admin, rate, ds.URL)
	}
	path := writeFile(t, conf("1/s"))
	p := startShaperdFile(t, path, admin)
	cmd, exited, stderr := p.cmd, p.exited, p.stderr

	// SIGHUP with a new rate.
	if err := os.WriteFile(path, []byte(conf("4/s")), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, 5*time.Second, func() bool { return adminRate(t, "http://"+admin) == 4 }, "rate 4 after SIGHUP")

	// An invalid file is refused; the running config stays.
	if err := os.WriteFile(path, []byte("downstreams: [truncated"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, 5*time.Second, func() bool { return strings.Contains(stderr.String(), "reload refused") }, "a log line about the refused reload")
	if r := adminRate(t, "http://"+admin); r != 4 {
		t.Errorf("rate %v after an invalid reload, want 4", r)
	}

	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	dead := subscribeDead(t, nc, "dl.printer")
	for i := range 10 {
		if _, err := nc.Request("shaper.jobs.printer", []byte(fmt.Sprint(i)), 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	ds.waitHits(t, 1, 5*time.Second)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("shaperd exited with %v after SIGTERM; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("shaperd did not exit within 20s of SIGTERM")
	}
	delivered := len(ds.snapshot())
	for n := 0; n+delivered < 10; n++ {
		if m := recvMsg(t, dead, 5*time.Second); m.Header.Get("Shaper-Reason") != "shutdown" {
			t.Errorf("dead letter reason %q", m.Header.Get("Shaper-Reason"))
		}
	}
}

// readyOrExit waits up to 20 s for /readyz to answer 200, and returns an
// error if the process exits first or is not ready in time.
func readyOrExit(admin string, exited chan error, stderr *syncBuffer) error {
	return readyWithin(admin, exited, stderr, 20*time.Second)
}

// readyWithin is readyOrExit waiting up to within.
func readyWithin(admin string, exited chan error, stderr *syncBuffer, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			exited <- err // still there for kill, which waits on it
			return fmt.Errorf("shaperd exited early (%v):\n%s", err, stderr.String())
		default:
		}
		if resp, err := http.Get(admin + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("shaperd not ready within %s:\n%s", within, stderr.String())
}

func adminRate(t *testing.T, admin string) float64 {
	t.Helper()
	resp, err := http.Get(admin + "/v1/downstreams")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Downstreams []struct {
			Rate float64 `json:"rate"`
		} `json:"downstreams"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || len(v.Downstreams) != 1 {
		t.Fatalf("/v1/downstreams: %v %+v", err, v)
	}
	return v.Downstreams[0].Rate
}

func waitFor(t testing.TB, within time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for the process writer and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A second SIGTERM while shutting down exits at once with code 1 and says
// that queued jobs were not dead-lettered.
func TestShaperdSecondSignalExitsAtOnce(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	release := make(chan struct{})
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer stuck.Close()
	defer close(release)
	admin := freeAddr(t)
	path := writeFile(t, fmt.Sprintf(`
nats: { url: %q }
admin: { listen: %q }
shutdown_grace: 60s
downstreams:
  printer:
    rate: 10/s
    queue: { capacity: 20, backend: memory }
    sink: { http: { url: %q, timeout: 5m } }
`, srv.ClientURL(), admin, stuck.URL))
	p := startShaperdFile(t, path, admin)
	cmd, exited, stderr := p.cmd, p.exited, p.stderr
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for i := range 3 {
		if _, err := nc.Request("shaper.jobs.printer", []byte(fmt.Sprint(i)), 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond) // the first delivery is now stuck in flight
	_ = cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, 5*time.Second, func() bool { return strings.Contains(stderr.String(), "shutting down") }, "the first signal to start shutdown")
	second := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 1 {
			t.Fatalf("exit %v after the second signal, want code 1", err)
		}
		if took := time.Since(second); took > 3*time.Second {
			t.Errorf("took %s to exit after the second signal", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("second SIGTERM did not exit at once (grace is 60 s)")
	}
	if !strings.Contains(stderr.String(), "second signal") {
		t.Errorf("no log line about the second signal:\n%s", stderr.String())
	}
}
