package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const sampleDownstreams = `{"downstreams":[
 {"name":"printer","rate":"2/s","effective_rate":"1.5/s","depth":3,"capacity":10,"inflight":1,"key_concurrency":1,"paused":false,
  "received":15,"accepted":10,"rejected":{"queue_full":5},"dropped":{"expired":0},"started":7,
  "delivered":{"success":6,"failed":1},"retries":2},
 {"name":"erp","rate":50,"depth":0,"capacity":1000,"inflight":0,"key_concurrency":0,"paused":true,"paused_until":"2024-01-01T12:00:03Z",
  "batch":{"max_jobs":100,"max_bytes":1048576,"linger_seconds":0.2,"encoding":"ndjson","calls":8,"jobs":700}}
]}`

func TestRenderStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/downstreams" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(sampleDownstreams))
	}))
	defer srv.Close()
	code, stdout, stderr := runCmd(t, "status", "-admin", srv.URL)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	t.Log("\n" + stdout)
	want := `NAME     RATE                            QUEUE                INFLIGHT    PAUSED                      COUNTERS
printer  2/s (effective 1.5/s)           [###-------] 3/10    1 (≤1/key)  no                          received=15 accepted=10 rejected{queue_full=5} dropped=0 started=7 delivered{failed=1,success=6} retries=2
erp      50/s calls of ≤100 (mean 87.5)  [----------] 0/1000  0           until 2024-01-01T12:00:03Z  -
`
	if stdout != want {
		t.Errorf("table:\n%s\nwant:\n%s", stdout, want)
	}
	code, stdout, _ = runCmd(t, "status", "-admin", strings.TrimPrefix(srv.URL, "http://"), "-json")
	if code != exitOK || !strings.Contains(stdout, `"name": "printer"`) {
		t.Errorf("-json: exit %d\n%s", code, stdout)
	}
}

func TestStatusErrors(t *testing.T) {
	starting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":"starting"}`))
	}))
	defer starting.Close()
	tests := []struct {
		name, admin, want string
	}{
		{"unreachable", unreachableAdmin, "cannot reach the admin API at " + unreachableAdmin},
		{"unreachable hint", unreachableAdmin, "is shaperd running? is -admin right (admin.listen in its config)?"},
		{"503", starting.URL, "503 Service Unavailable: starting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCmd(t, "status", "-admin", tt.admin)
			if code != exitFailed || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, stderr, tt.want)
			}
		})
	}
}

// TestStatusWatch stops the watch from its output, once the third table is
// printed: no request is ever cut off mid-dial (a dial left in flight when
// a deadline fell would outlive the test), and a loaded machine cannot
// make it miss a refresh.
func TestStatusWatch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"downstreams":[]}`))
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stdout := &cancelAfter{text: "no downstreams configured", n: 3, cancel: cancel}
	var stderr bytes.Buffer
	code := run(ctx, []string{"status", "-admin", srv.URL, "-watch", "50ms"}, stdout, &stderr)
	if n := strings.Count(stdout.String(), "no downstreams configured"); code != exitOK || n != 3 {
		t.Errorf("exit %d, %d refreshes; want 0 and 3\n%s%s", code, n, stdout, &stderr)
	}
}

// cancelAfter is an output that calls cancel once text was written n times.
type cancelAfter struct {
	bytes.Buffer
	text   string
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Write(p []byte) (int, error) {
	n, err := c.Buffer.Write(p)
	if strings.Count(c.String(), c.text) >= c.n {
		c.cancel()
	}
	return n, err
}

func TestStatusColumns(t *testing.T) {
	tests := []struct {
		name string
		d    map[string]any
		fn   func(map[string]any) string
		want string
	}{
		{"rate number", map[string]any{"rate": 0.5}, rateColumn, "30/m"},
		{"rate same effective", map[string]any{"rate": "2/s", "effective_rate": "2/s"}, rateColumn, "2/s"},
		{"rate missing", map[string]any{}, rateColumn, "-"},
		{"queue full", map[string]any{"depth": 10.0, "capacity": 10.0}, queueColumn, "[##########] 10/10"},
		{"queue one of many", map[string]any{"depth": 1.0, "capacity": 1000.0}, queueColumn, "[#---------] 1/1000"},
		{"queue unknown", map[string]any{"depth": 4.0}, queueColumn, "4/-"},
		{"queue levels and delayed", map[string]any{"depth": 3.0, "capacity": 10.0, "levels": []any{1.0, 0.0, 1.0}, "delayed": 1.0},
			queueColumn, "[###-------] 3/10 by level 1/0/1, 1 delayed"},
		{"queue delayed only", map[string]any{"depth": 2.0, "capacity": 10.0, "delayed": 2.0}, queueColumn, "[##--------] 2/10 2 delayed"},
		{"queue none delayed", map[string]any{"depth": 2.0, "capacity": 10.0, "delayed": 0.0}, queueColumn, "[##--------] 2/10"},
		{"paused", map[string]any{"paused": true}, pausedColumn, "yes"},
		{"paused zero until", map[string]any{"paused": false, "paused_until": "0001-01-01T00:00:00Z"}, pausedColumn, "no"},
		{"counters order", map[string]any{"zeta": 1.0, "started": 2.0, "received": 3.0, "name": "x"}, countersColumn, "received=3 started=2 zeta=1"},
		{"counters zeros", map[string]any{"rejected": map[string]any{"queue_full": 0.0, "bad_request": 2.0}, "dropped": map[string]any{"expired": 0.0}},
			countersColumn, "rejected{bad_request=2} dropped=0"},
		{"counters nested", map[string]any{"delivered": map[string]any{"b": 1.5, "a": map[string]any{"x": 1.0}}}, countersColumn, "delivered{a{x=1},b=1.5}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.fn(tt.d); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
