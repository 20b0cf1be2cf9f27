package admin

import (
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shaperd/shaper/config"
)

func TestReadyz(t *testing.T) {
	tests := []struct {
		name     string
		problems []string
		want     int
		body     string
	}{
		{"ready", nil, 200, `{"status":"ready"}`},
		{"not ready", []string{"NATS not connected", notRunning},
			503, `{"problems":["NATS not connected","` + notRunning + `"],"status":"unready"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := Start(adminLoopback(), Deps{
				Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry(),
				Downstreams: func() Downstreams { return nil },
				NotReady:    func() []string { return tt.problems },
				History:     NewHistory(0, nil),
			})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := srv.Stop(); err != nil || srv.Stop() != nil { // idempotent
					t.Errorf("Stop: %v", err)
				}
			}()
			status, hdr, body := get(t, "http://"+srv.Addr()+"/readyz")
			if status != tt.want || hdr.Get("Content-Type") != "application/json" || compact(t, body) != tt.body {
				t.Errorf("GET /readyz: %d %s %s, want %d %s", status, hdr.Get("Content-Type"), body, tt.want, tt.body)
			}
		})
	}
}

// Before the shaper exists, the routes that need it say so.
func TestStarting(t *testing.T) {
	srv, err := Start(adminLoopback(), Deps{
		Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry(),
		Downstreams: func() Downstreams { return nil },
		NotReady:    func() []string { return []string{notRunning} },
		History:     NewHistory(0, nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Stop() }()
	url := "http://" + srv.Addr()
	if status, _, body := get(t, url+"/v1/downstreams"); status != 503 || compact(t, body) != `{"error":"starting"}` {
		t.Errorf("GET /v1/downstreams: %d %s", status, body)
	}
	if status, body := post(t, url+"/v1/downstreams/printer/pause"); status != 503 || compact(t, body) != `{"error":"starting"}` {
		t.Errorf("POST pause: %d %s", status, body)
	}
	if status, _, body := get(t, url+"/"); status != 200 || !strings.Contains(body, "0 downstreams") {
		t.Errorf("GET /: %d %s", status, body)
	}
}

func TestPauseResume(t *testing.T) {
	a := startTestAdmin(t, adminLoopback(), "printer")
	tests := []struct {
		op, name string
		want     int
		body     string
		paused   bool
	}{
		{"pause", "printer", 200, `{"downstream":"printer","status":"paused"}`, true},
		{"pause", "printer", 200, `{"downstream":"printer","status":"paused"}`, true},
		{"resume", "printer", 200, `{"downstream":"printer","status":"resumed"}`, false},
		{"pause", "nope", 404, `{"error":"no downstream named \"nope\"; GET /v1/downstreams lists them"}`, false},
		{"resume", "nope", 404, `{"error":"no downstream named \"nope\"; GET /v1/downstreams lists them"}`, false},
	}
	for _, tt := range tests {
		status, body := post(t, a.url+"/v1/downstreams/"+tt.name+"/"+tt.op)
		if status != tt.want || compact(t, body) != tt.body {
			t.Errorf("POST %s %s: %d %s, want %d %s", tt.op, tt.name, status, body, tt.want, tt.body)
		}
		if got := a.lanes.Lanes()[0].Paused; got != tt.paused {
			t.Errorf("after %s %s: paused %v, want %v", tt.op, tt.name, got, tt.paused)
		}
	}
	if logs := a.logs.String(); !strings.Contains(logs, `level=INFO msg="downstream paused through the admin API" downstream=printer by="anonymous (127.0.0.1:`) ||
		!strings.Contains(logs, `level=INFO msg="downstream resumed through the admin API" downstream=printer by="anonymous (127.0.0.1:`) {
		t.Errorf("logs lack the pause and resume lines:\n%s", logs)
	}
	var list struct {
		Downstreams []map[string]any `json:"downstreams"`
	}
	status, _, body := get(t, a.url+"/v1/downstreams")
	if err := json.Unmarshal([]byte(body), &list); err != nil || status != 200 {
		t.Fatalf("GET /v1/downstreams: %d %s %v", status, body, err)
	}
	if len(list.Downstreams) != 1 || list.Downstreams[0]["name"] != "printer" {
		t.Errorf("downstreams %v", list.Downstreams)
	}
	for _, path := range []string{"/healthz", "/metrics"} {
		if status, _, body := get(t, a.url+path); status != 200 {
			t.Errorf("GET %s: %d %s", path, status, body)
		}
	}
}

func TestListenError(t *testing.T) {
	_, err := Start(config.Admin{Listen: "127.0.0.1:notaport"}, Deps{Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.HasPrefix(err.Error(), `admin.listen "127.0.0.1:notaport": `) {
		t.Fatalf("Start on a bad address: %v", err)
	}
}

// compact is body without its indentation, for comparison.
func compact(t *testing.T, body string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("not JSON: %s", body)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// A connection that never sent a request (a client's spare dial, a port
// probe) does not hold Stop up: the server would otherwise wait 5 s for
// it and report context.DeadlineExceeded.
func TestStopDoesNotWaitForSilentConnections(t *testing.T) {
	srv, err := Start(adminLoopback(), Deps{
		Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry(),
		Downstreams: func() Downstreams { return nil },
		NotReady:    func() []string { return nil },
		History:     NewHistory(0, nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	if status, _, _ := get(t, "http://"+srv.Addr()+"/readyz"); status != 200 {
		t.Fatalf("GET /readyz: %d", status)
	}
	silent, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	time.Sleep(100 * time.Millisecond) // accepted: the server tracks it
	start := time.Now()
	if err := srv.Stop(); err != nil {
		t.Errorf("Stop: %v, want nil", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Stop took %v with a silent connection open, want well under the 5 s a silent connection is waited for", took)
	}
	if _, err := silent.Read(make([]byte, 1)); err == nil {
		t.Error("the silent connection is still open after Stop")
	}
}
