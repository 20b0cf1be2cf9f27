package daemon

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/shaperd/shaper/config"
	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/sink"
)

// testAdmin is the admin listener of a daemon that was never Run: a shaper
// with the given lanes (not running, so queued jobs stay queued) and no NATS.
type testAdmin struct {
	d    *Daemon
	sh   *shaper.Shaper
	url  string // http(s)://host:port
	logs *syncBuffer
}

func startTestAdmin(t *testing.T, admin config.Admin, lanes ...string) *testAdmin {
	t.Helper()
	cfg := config.Defaults()
	if admin.Listen == "" {
		admin.Listen = "127.0.0.1:0"
	}
	cfg.Admin = admin
	logs := &syncBuffer{}
	d, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), HistoryInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var set shaper.Settings
	for _, name := range lanes {
		set.Lanes = append(set.Lanes, shaper.LaneSettings{Name: name, Rate: 2, Capacity: 10,
			Sink: shaper.SinkSpec{HTTP: &shaper.HTTPSinkSpec{URL: "http://127.0.0.1:1/never", Method: "POST"}}})
	}
	sh, err := shaper.New(set, shaper.Deps{Sinks: sink.For(nil)})
	if err != nil {
		t.Fatal(err)
	}
	d.shaper.Store(sh)
	stop, err := d.startAdmin(cfg.Admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop admin: %v", err)
		}
	})
	scheme := "http://"
	if admin.TLS.CertFile != "" {
		scheme = "https://"
	}
	return &testAdmin{d: d, sh: sh, url: scheme + d.AdminAddr(), logs: logs}
}

func adminLoopback() config.Admin { return config.Admin{Listen: "127.0.0.1:0"} }

// submit offers n jobs to lane and returns how many were accepted.
func (a *testAdmin) submit(lane string, n int) int {
	accepted := 0
	for i := range n {
		if a.sh.Submit(&queue.Job{ID: fmt.Sprintf("%s-%d", lane, i), Downstream: lane}).Accepted {
			accepted++
		}
	}
	return accepted
}

// call does one request and returns status, headers and body. The client
// keeps no idle connections, so goleak sees none after the test.
func call(t *testing.T, c *http.Client, req *http.Request) (int, http.Header, string) {
	t.Helper()
	if c == nil {
		c = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func get(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return call(t, nil, req)
}

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
