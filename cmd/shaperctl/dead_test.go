package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

const (
	sampleDeadList = `{"dead_letters":[
 {"seq":12,"job_id":"mXhY1","reason":"failed","error":"HTTP 500 Internal Server Error\nfrom upstream","attempts":5,"time":"2025-01-02T03:04:05.123Z","payload_bytes":28},
 {"seq":15,"job_id":"mXhY2","reason":"expired","error":"not started within max wait","attempts":0,"time":"2025-01-02T03:04:09Z","payload_bytes":3}
],"total":7}`
	sampleDeadShow = `{"seq":12,"job_id":"mXhY1","reason":"failed","error":"HTTP 500","attempts":5,"time":"2025-01-02T03:04:05.123Z",
 "payload_bytes":28,"payload_base64":"eyJqb2IiOjAsImZyb20iOiJzaGFwZXJjdGwifQ==","headers":{"X-Trace":["a","b"],"Content-Type":["application/json"]}}`
)

// deadAdmin is an httptest admin API serving the dead-letter routes of
// printer from the samples, recording each request it got.
type deadAdmin struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []string // "METHOD path?query body"
}

func newDeadAdmin(t *testing.T) *deadAdmin {
	a := &deadAdmin{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.reqs = append(a.reqs, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+string(body)))
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.Method + " " + r.URL.Path {
		case "GET /v1/downstreams/printer/dead":
			_, _ = w.Write([]byte(sampleDeadList))
		case "GET /v1/downstreams/printer/dead/12":
			_, _ = w.Write([]byte(sampleDeadShow))
		case "POST /v1/downstreams/printer/dead/replay":
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"replaying":5}`))
		case "DELETE /v1/downstreams/printer/dead":
			w.WriteHeader(http.StatusNoContent)
		case "GET /v1/downstreams/empty/dead":
			_, _ = w.Write([]byte(`{"dead_letters":[],"total":0}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":"no downstream named \"nope\"; GET /v1/downstreams lists them"}`))
		}
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *deadAdmin) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.reqs) == 0 {
		return ""
	}
	return a.reqs[len(a.reqs)-1]
}

func TestDeadOutput(t *testing.T) {
	a := newDeadAdmin(t)
	tests := []struct {
		name    string
		args    []string
		request string // what the admin API got
		want    string // stdout
	}{
		{"list", []string{"list", "-downstream", "printer"}, "GET /v1/downstreams/printer/dead",
			`SEQ  TIME                  REASON   ATTEMPTS  BYTES  JOB ID  ERROR
12   2025-01-02T03:04:05Z  failed   5         28     mXhY1   HTTP 500 Internal Server Error from upstream
15   2025-01-02T03:04:09Z  expired  0         3      mXhY2   not started within max wait
2 of 7 dead letters of printer, oldest first
`},
		{"list filtered", []string{"list", "-downstream", "printer", "-limit", "2", "-reason", "failed"},
			"GET /v1/downstreams/printer/dead?limit=2&reason=failed", "2 of 7 failed dead letters of printer, oldest first\n"},
		{"list empty", []string{"list", "-downstream", "empty"}, "GET /v1/downstreams/empty/dead",
			"no dead letters stored for empty\n"},
		{"show", []string{"show", "-downstream", "printer", "-seq", "12"}, "GET /v1/downstreams/printer/dead/12",
			`seq:      12
job id:   mXhY1
reason:   failed
error:    HTTP 500
attempts: 5
time:     2025-01-02T03:04:05.123Z
header:   Content-Type: application/json
header:   X-Trace: a
header:   X-Trace: b
payload (28 bytes):
{"job":0,"from":"shaperctl"}
`},
		{"replay", []string{"replay", "-downstream", "printer", "-rate", "2/s", "-limit", "100", "-reason", "failed"},
			`POST /v1/downstreams/printer/dead/replay {"limit":100,"rate":"2/s","reason":"failed"}`,
			"replaying 5 failed dead letters of printer, oldest first, at most 2/s, after any live jobs\n"},
		{"replay defaults", []string{"replay", "-downstream", "printer"}, `POST /v1/downstreams/printer/dead/replay {}`,
			"replaying 5 dead letters of printer, oldest first, at most the downstream's rate / 10, after any live jobs\n"},
		{"purge", []string{"purge", "-downstream", "printer"}, "DELETE /v1/downstreams/printer/dead",
			"purged every dead letter of printer\n"},
		{"replay json", []string{"replay", "-downstream", "printer", "-json"}, `POST /v1/downstreams/printer/dead/replay {}`,
			"{\n  \"replaying\": 5\n}\n"},
		{"purge json", []string{"purge", "-downstream", "printer", "-json"}, "DELETE /v1/downstreams/printer/dead",
			"{\n  \"downstream\": \"printer\",\n  \"purged\": true\n}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"dead"}, tt.args...)
			code, stdout, stderr := runCmd(t, append(args, "-admin", a.URL)...)
			if code != exitOK {
				t.Fatalf("exit %d, stderr %s", code, stderr)
			}
			if got := a.last(); got != tt.request {
				t.Errorf("admin API got %q, want %q", got, tt.request)
			}
			if !strings.HasSuffix(stdout, tt.want) || (tt.name != "list filtered" && stdout != tt.want) {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout, tt.want)
			}
		})
	}
	code, stdout, _ := runCmd(t, "dead", "list", "-downstream", "printer", "-json", "-admin", strings.TrimPrefix(a.URL, "http://"))
	if code != exitOK || !strings.Contains(stdout, "\"job_id\": \"mXhY1\"") {
		t.Errorf("list -json: exit %d\n%s", code, stdout)
	}
}

func TestDeadErrors(t *testing.T) {
	a := newDeadAdmin(t)
	tests := []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"no action", []string{"-downstream", "printer"}, exitUsage, "say what to do: list, show, replay or purge"},
		{"bad action", []string{"drop", "-downstream", "printer"}, exitUsage, `unknown action "drop"`},
		{"no downstream", []string{"list"}, exitUsage, "-downstream is required"},
		{"bad downstream", []string{"list", "-downstream", "a.b"}, exitUsage, "only letters, digits"},
		{"show no seq", []string{"show", "-downstream", "printer"}, exitUsage, "show needs -seq N"},
		{"bad rate", []string{"replay", "-downstream", "printer", "-rate", "fast"}, exitUsage, `-rate "fast" is not a rate`},
		{"negative limit", []string{"replay", "-downstream", "printer", "-limit", "-1"}, exitUsage, "-limit must be at least 1"},
		{"zero limit", []string{"replay", "-downstream", "printer", "-limit", "0"}, exitUsage, "-limit must be at least 1, got 0"},
		{"zero list limit", []string{"list", "-downstream", "printer", "-limit", "0"}, exitUsage, "-limit must be at least 1, got 0"},
		{"stray flag", []string{"purge", "-downstream", "printer", "-rate", "2/s"}, exitUsage, "purge does not take -rate"},
		{"stray seq", []string{"list", "-downstream", "printer", "-seq", "3"}, exitUsage, "list does not take -seq"},
		{"404", []string{"list", "-downstream", "nope", "-admin", a.URL}, exitFailed,
			`GET /v1/downstreams/nope/dead: 404 Not Found: no downstream named "nope"`},
		{"unreachable", []string{"list", "-downstream", "printer", "-admin", unreachableAdmin}, exitFailed,
			"cannot reach the admin API at " + unreachableAdmin},
		{"password hidden", []string{"list", "-downstream", "printer", "-admin", strings.Replace(unreachableAdmin, "http://", "http://ops:s3cret@", 1)},
			exitFailed, "cannot reach the admin API at " + unreachableAdmin + ":"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCmd(t, append([]string{"dead"}, tt.args...)...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tt.code, tt.want)
			}
			if strings.Contains(stderr, "s3cret") {
				t.Errorf("stderr shows the password: %s", stderr)
			}
		})
	}
}
