package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shaperd/shaper/config"
	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/deadletter"
)

// fakeDead stands in for the daemon's dead-letter store and replayers:
// downstream "printer" holds what a test puts in it, any other name is
// unknown. Safe for concurrent use.
type fakeDead struct {
	mu      sync.Mutex
	held    []DeadLetterDetail // oldest first
	replays []ReplayRequest
	fail    error // every call fails with it when set
}

func (f *fakeDead) lookup(name string) error {
	if f.fail != nil {
		return f.fail
	}
	if name != "printer" {
		return fmt.Errorf("downstream %q: %w", name, shaper.ErrUnknownDownstream)
	}
	return nil
}

func (f *fakeDead) List(_ context.Context, name string, q DeadQuery) ([]DeadLetter, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.lookup(name); err != nil {
		return nil, 0, err
	}
	var out []DeadLetter
	total := 0
	for _, d := range f.held {
		if q.Reason == "" || d.Reason == q.Reason {
			total++
			if len(out) < q.Limit {
				out = append(out, d.DeadLetter)
			}
		}
	}
	return out, total, nil
}

func (f *fakeDead) Get(_ context.Context, name string, seq uint64) (DeadLetterDetail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.lookup(name); err != nil {
		return DeadLetterDetail{}, err
	}
	for _, d := range f.held {
		if d.Seq == seq {
			return d, nil
		}
	}
	return DeadLetterDetail{}, fmt.Errorf("seq %d: %w", seq, deadletter.ErrNotFound)
}

func (f *fakeDead) Delete(_ context.Context, name string, seq uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.lookup(name); err != nil {
		return err
	}
	for i, d := range f.held {
		if d.Seq == seq {
			f.held = append(f.held[:i], f.held[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("seq %d: %w", seq, deadletter.ErrNotFound)
}

func (f *fakeDead) Purge(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.lookup(name); err != nil {
		return err
	}
	f.held = nil
	return nil
}

func (f *fakeDead) Replay(_ context.Context, name string, r ReplayRequest) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.lookup(name); err != nil {
		return 0, err
	}
	f.replays = append(f.replays, r)
	n := 0
	for _, d := range f.held {
		if r.Reason == "" || d.Reason == r.Reason {
			n++
		}
	}
	if r.Limit > 0 {
		n = min(n, r.Limit)
	}
	return n, nil
}

// startDeadAdmin starts a server whose dead-letter routes use dead, which
// holds three dead letters of printer: seq 3 and 7 failed, 9 expired.
func startDeadAdmin(t *testing.T, dead *fakeDead) string {
	t.Helper()
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, seq := range []uint64{3, 7, 9} {
		reason := "failed"
		if seq == 9 {
			reason = "expired"
		}
		dead.held = append(dead.held, DeadLetterDetail{
			DeadLetter: DeadLetter{Seq: seq, JobID: fmt.Sprintf("job%d", seq), Reason: reason, Error: "HTTP 500",
				Attempts: 2, Time: at.Add(time.Duration(i) * time.Second), PayloadBytes: 5},
			Payload: []byte("hello"), Headers: map[string][]string{"Content-Type": {"text/plain"}},
		})
	}
	srv, err := Start(config.Admin{Listen: "127.0.0.1:0"}, Deps{
		Logger:      slog.New(slog.DiscardHandler),
		Registry:    prometheus.NewRegistry(),
		Downstreams: func() Downstreams { return newFakeLanes("printer") },
		NotReady:    func() []string { return nil },
		History:     NewHistory(time.Second, nil),
		DeadLetters: dead,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	return "http://" + srv.Addr()
}

func send(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	status, _, b := call(t, nil, req)
	return status, b
}

func TestDeadList(t *testing.T) {
	base := startDeadAdmin(t, &fakeDead{}) + "/v1/downstreams/printer/dead"
	status, body := send(t, "GET", base, "")
	want := `{
  "dead_letters": [
    {"seq": 3, "job_id": "job3", "reason": "failed", "error": "HTTP 500", "attempts": 2, "time": "2025-01-02T03:04:05Z", "payload_bytes": 5},
    {"seq": 7, "job_id": "job7", "reason": "failed", "error": "HTTP 500", "attempts": 2, "time": "2025-01-02T03:04:06Z", "payload_bytes": 5},
    {"seq": 9, "job_id": "job9", "reason": "expired", "error": "HTTP 500", "attempts": 2, "time": "2025-01-02T03:04:07Z", "payload_bytes": 5}
  ],
  "total": 3
}`
	if status != 200 || jsonText(t, body) != jsonText(t, want) {
		t.Fatalf("GET dead: %d\n%s\nwant 200\n%s", status, body, want)
	}
	tests := []struct {
		name, query string
		status      int
		want        string // in the body
	}{
		{"limit", "?limit=1", 200, `"total":3`},
		{"reason", "?reason=expired", 200, `"seq":9`},
		{"no match", "?reason=shutdown", 200, `{"dead_letters":[],"total":0}`},
		{"limit 0", "?limit=0", 400, `limit: must be a whole number 1..10000, got \"0\"`},
		{"limit too big", "?limit=10001", 400, `limit: must be a whole number 1..10000`},
		{"limit text", "?limit=all", 400, `limit: must be a whole number 1..10000, got \"all\"`},
		{"bad reason", "?reason=faild", 400, `reason: \"faild\" is not a dead-letter reason; valid: failed, expired`},
		{"unknown param", "?sort=desc", 400, `\"sort\": unknown query parameter; valid ones: limit, reason`},
		{"twice", "?limit=1&limit=2", 400, `limit: given 2 times`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := send(t, "GET", base+tt.query, "")
			if status != tt.status || !strings.Contains(jsonText(t, body), tt.want) {
				t.Errorf("GET dead%s: %d %s, want %d with %s", tt.query, status, body, tt.status, tt.want)
			}
		})
	}
}

func TestDeadShowDelete(t *testing.T) {
	dead := &fakeDead{}
	url := startDeadAdmin(t, dead)
	status, body := send(t, "GET", url+"/v1/downstreams/printer/dead/7", "")
	want := `{"seq":7,"job_id":"job7","reason":"failed","error":"HTTP 500","attempts":2,"time":"2025-01-02T03:04:06Z",` +
		`"payload_bytes":5,"payload_base64":"aGVsbG8=","headers":{"Content-Type":["text/plain"]}}`
	if status != 200 || jsonText(t, body) != want {
		t.Fatalf("GET dead/7: %d %s\nwant 200 %s", status, body, want)
	}
	tests := []struct {
		name, method, path string
		status             int
		want               string
	}{
		{"unknown seq", "GET", "/v1/downstreams/printer/dead/8", 404, `downstream \"printer\" holds no dead letter 8`},
		{"bad seq", "GET", "/v1/downstreams/printer/dead/x", 400, `seq: must be a whole number from 1`},
		{"seq 0", "DELETE", "/v1/downstreams/printer/dead/0", 400, `seq: must be a whole number from 1`},
		{"unknown downstream", "GET", "/v1/downstreams/nope/dead", 404, `no downstream named \"nope\"`},
		{"unknown downstream show", "GET", "/v1/downstreams/nope/dead/3", 404, `no downstream named \"nope\"`},
		{"unknown downstream purge", "DELETE", "/v1/downstreams/nope/dead", 404, `no downstream named \"nope\"`},
		{"delete", "DELETE", "/v1/downstreams/printer/dead/7", 204, ""},
		{"deleted", "GET", "/v1/downstreams/printer/dead/7", 404, `holds no dead letter 7`},
		{"delete again", "DELETE", "/v1/downstreams/printer/dead/7", 404, `holds no dead letter 7`},
		{"purge", "DELETE", "/v1/downstreams/printer/dead", 204, ""},
		{"purged", "GET", "/v1/downstreams/printer/dead", 200, `"total":0`},
	}
	for _, tt := range tests {
		status, body := send(t, tt.method, url+tt.path, "")
		if status != tt.status || !strings.Contains(jsonText(t, body), tt.want) {
			t.Errorf("%s: %s %s: %d %s, want %d with %s", tt.name, tt.method, tt.path, status, body, tt.status, tt.want)
		}
	}
}

func TestDeadReplayBody(t *testing.T) {
	dead := &fakeDead{}
	url := startDeadAdmin(t, dead) + "/v1/downstreams/printer/dead/replay"
	tests := []struct {
		name, body string
		status     int
		want       string
		req        ReplayRequest // the request the store got, when 202
	}{
		{"empty body", "", 202, `{"replaying":3}`, ReplayRequest{}},
		{"empty object", "{}", 202, `{"replaying":3}`, ReplayRequest{}},
		{"all fields", `{"rate":"5/s","limit":1,"reason":"failed"}`, 202, `{"replaying":1}`,
			ReplayRequest{Rate: 5, Limit: 1, Reason: "failed"}},
		{"per minute", `{"rate":"30/m","reason":"expired"}`, 202, `{"replaying":1}`,
			ReplayRequest{Rate: 0.5, Reason: "expired"}},
		{"rate fast", `{"rate":"fast"}`, 400, `rate: \"fast\" is not a rate; write e.g. 2/s or 120/m`, ReplayRequest{}},
		{"rate bare", `{"rate":"5"}`, 400, `rate: \"5\" is not a rate: it needs a unit`, ReplayRequest{}},
		{"rate too high", `{"rate":"2000000/s"}`, 400, `rate: must be 1/h..1000000/s`, ReplayRequest{}},
		{"rate number", `{"rate":5}`, 400, `rate: must be a string such as \"5/s\"`, ReplayRequest{}},
		{"limit negative", `{"limit":-1}`, 400, `limit: must be a whole number from 1 (leave it out to replay every match), got -1`, ReplayRequest{}},
		{"limit zero", `{"limit":0}`, 400, `limit: must be a whole number from 1`, ReplayRequest{}},
		{"limit fraction", `{"limit":1.5}`, 400, `limit: must be a whole number from 1, got a JSON number`, ReplayRequest{}},
		{"limit text", `{"limit":"10"}`, 400, `limit: must be a whole number from 1, got a JSON string`, ReplayRequest{}},
		{"bad reason", `{"reason":"oops"}`, 400, `reason: \"oops\" is not a dead-letter reason`, ReplayRequest{}},
		{"unknown field", `{"rate":"5/s","speed":3}`, 400, `\"speed\": unknown field; valid fields: rate, limit, reason`, ReplayRequest{}},
		{"not json", `rate=5/s`, 400, `body: not valid JSON`, ReplayRequest{}},
		{"truncated", `{"rate":"5/s"`, 400, `body: not valid JSON`, ReplayRequest{}},
		{"array", `[1]`, 400, `body: must be a JSON object with the optional fields rate, limit, reason`, ReplayRequest{}},
		{"two objects", `{} {}`, 400, `body: one JSON object expected`, ReplayRequest{}},
		{"too large", `{"reason":"` + strings.Repeat("x", maxBody) + `"}`, 413, `request body larger than 1024 bytes`, ReplayRequest{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dead.mu.Lock()
			dead.replays = nil
			dead.mu.Unlock()
			status, body := send(t, "POST", url, tt.body)
			if status != tt.status || !strings.Contains(jsonText(t, body), tt.want) {
				t.Fatalf("POST replay %s: %d %s, want %d with %s", tt.body, status, body, tt.status, tt.want)
			}
			dead.mu.Lock()
			defer dead.mu.Unlock()
			switch {
			case status == 202 && (len(dead.replays) != 1 || dead.replays[0] != tt.req):
				t.Errorf("store got %+v, want %+v", dead.replays, tt.req)
			case status != 202 && len(dead.replays) != 0:
				t.Errorf("a refused body reached the store: %+v", dead.replays)
			}
		})
	}
	if status, body := send(t, "POST", strings.Replace(url, "printer", "nope", 1), ""); status != 404 {
		t.Errorf("replay of an unknown downstream: %d %s, want 404", status, body)
	}
}

// A store that fails answers 503 with its error; no store at all is 503 too.
func TestDeadStoreUnavailable(t *testing.T) {
	url := startDeadAdmin(t, &fakeDead{fail: errors.New("the NATS server has no JetStream")})
	for _, tt := range []struct{ method, path string }{
		{"GET", "/v1/downstreams/printer/dead"}, {"GET", "/v1/downstreams/printer/dead/3"},
		{"POST", "/v1/downstreams/printer/dead/replay"}, {"DELETE", "/v1/downstreams/printer/dead/3"},
		{"DELETE", "/v1/downstreams/printer/dead"},
	} {
		status, body := send(t, tt.method, url+tt.path, "")
		if status != 503 || !strings.Contains(body, "dead-letter store: the NATS server has no JetStream") {
			t.Errorf("%s %s: %d %s, want 503 naming the cause", tt.method, tt.path, status, body)
		}
	}
	a := startTestAdmin(t, adminLoopback(), "printer") // Deps.DeadLetters nil
	if status, _, body := get(t, a.url+"/v1/downstreams/printer/dead"); status != 503 || !strings.Contains(body, "no dead-letter store") {
		t.Errorf("without a store: %d %s, want 503", status, body)
	}
}

// The dead-letter routes are behind basic auth like the rest of /v1.
func TestDeadRoutesNeedAuth(t *testing.T) {
	a := startTestAdmin(t, withAuth(t, "ops", "secret"), "printer")
	for _, tt := range []struct{ method, path string }{
		{"GET", "/v1/downstreams/printer/dead"}, {"GET", "/v1/downstreams/printer/dead/3"},
		{"POST", "/v1/downstreams/printer/dead/replay"}, {"DELETE", "/v1/downstreams/printer/dead/3"},
		{"DELETE", "/v1/downstreams/printer/dead"},
	} {
		if status, body := send(t, tt.method, a.url+tt.path, ""); status != http.StatusUnauthorized {
			t.Errorf("%s %s without credentials: %d %s, want 401", tt.method, tt.path, status, body)
		}
	}
}

// jsonText removes insignificant space from a JSON text, keeping its
// order (or returns it trimmed when it is not JSON).
func jsonText(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) != nil {
		return strings.TrimSpace(s)
	}
	return b.String()
}
