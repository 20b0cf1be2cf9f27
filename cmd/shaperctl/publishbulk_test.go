package main

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// bulkSeen is one bulk request the fake daemon got.
type bulkSeen struct {
	header nats.Header
	jobs   int
	reply  bool // it asked for a reply
}

// handleBulk answers a bulk request job by job, each as handle would
// answer it alone: its headers are the request's, its own winning, and
// its payload its data as written or data_base64 decoded.
func (f *fakeDaemon) handleBulk(m *nats.Msg) {
	var jobs []struct {
		Data       json.RawMessage   `json:"data"`
		DataBase64 *string           `json:"data_base64"`
		Headers    map[string]string `json:"headers"`
	}
	_ = json.Unmarshal(m.Data, &jobs)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bulk = append(f.bulk, bulkSeen{header: m.Header, jobs: len(jobs), reply: m.Reply != ""})
	answers := make([]map[string]any, len(jobs))
	accepted := 0
	for i, j := range jobs {
		h := nats.Header{}
		for name, vs := range m.Header {
			h[name] = vs
		}
		for name, v := range j.Headers {
			h.Set(name, v)
		}
		data := []byte(j.Data)
		if j.DataBase64 != nil {
			data, _ = base64.StdEncoding.DecodeString(*j.DataBase64)
		}
		answers[i], _ = f.job(h, data)
		answers[i]["index"] = i
		if answers[i]["status"] == "accepted" {
			accepted++
		}
	}
	if m.Reply == "" {
		return
	}
	status := "partial"
	switch accepted {
	case len(jobs):
		status = "accepted"
	case 0:
		status = "rejected"
	}
	reply := nats.NewMsg(m.Reply)
	reply.Header.Set("Shaper-Status", status)
	reply.Header.Set("Shaper-Accepted", strconv.Itoa(accepted))
	reply.Header.Set("Shaper-Rejected", strconv.Itoa(len(jobs)-accepted))
	reply.Data, _ = json.Marshal(map[string]any{"status": status, "downstream": "printer",
		"accepted": accepted, "rejected": len(jobs) - accepted, "jobs": answers})
	_ = m.RespondMsg(reply)
}

func (f *fakeDaemon) bulkRequests() []bulkSeen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.bulk)
}

// With -bulk the summary is the one of single-job requests.
func TestPublishBulkSummary(t *testing.T) {
	srv := runNATS(t)
	f := startFakeDaemon(t, srv.ClientURL(), 10)
	code, stdout, stderr := runCmd(t, "publish", "-nats", srv.ClientURL(), "-downstream", "printer", "-n", "15", "-concurrency", "1", "-bulk", "4")
	if code != exitOK {
		t.Fatalf("exit %d, stderr: %s", code, stderr)
	}
	t.Log("\n" + stdout)
	for _, want := range []string{
		"published 15 of 15 jobs to shaper.bulk.printer in ",
		"  accepted       10  positions 1..10, eta 0.5s..5s\n",
		"  duplicates      0\n",
		"  rejected        5  queue_full=5\n",
		"  retry-after        1s×5\n",
		"  no answer       0\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	var sizes []int
	for _, b := range f.bulkRequests() {
		sizes = append(sizes, b.jobs)
	}
	if !slices.Equal(sizes, []int{4, 4, 4, 3}) {
		t.Errorf("requests of %v jobs, want 4 4 4 3", sizes)
	}
}

// Each job's flags become its headers; a payload that is not JSON is sent
// as bytes and arrives as written; -atomic is a header of the request.
func TestPublishBulkKeysDuplicatesAndHeaders(t *testing.T) {
	srv := runNATS(t)
	f := startFakeDaemon(t, srv.ClientURL(), 100)
	args := []string{"publish", "-nats", srv.ClientURL(), "-downstream", "printer", "-n", "9", "-keys", "3",
		"-msg-id-prefix", "run1-", "-max-wait", "30s", "-payload", "job {i}", "-bulk", "5", "-atomic", "-v"}
	code, stdout, stderr := runCmd(t, args...)
	if code != exitOK {
		t.Fatalf("exit %d, stderr: %s", code, stderr)
	}
	t.Log("\n" + stdout)
	for _, want := range []string{"accepted        6", "rejected        3  rate_limited=3", "retry-after        3s×3",
		"2    key-2  rejected"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("first run lacks %q", want)
		}
	}
	// The two requests may arrive in either order: job 4 is found by its payload.
	f.mu.Lock()
	var h nats.Header
	var payload string
	for i, p := range f.payloads {
		if p == "job 4" {
			h, payload = f.headers[i], p
		}
	}
	f.mu.Unlock()
	if h.Get("Shaper-Max-Wait") != "30s" || h.Get("Nats-Msg-Id") != "run1-4" || h.Get("Shaper-Key") != "key-1" || payload != "job 4" {
		t.Errorf("job 4: headers %v, payload %q", h, payload)
	}
	if b := f.bulkRequests(); len(b) != 2 || b[0].header.Get("Shaper-Bulk-Atomic") != "true" {
		t.Errorf("bulk requests %+v, want 2 with Shaper-Bulk-Atomic", b)
	}
	_, stdout, _ = runCmd(t, args...)
	if !strings.Contains(stdout, "duplicates      6") || !strings.Contains(stdout, "accepted (duplicate)") {
		t.Errorf("second run should report 6 duplicates:\n%s", stdout)
	}
}

func TestPublishBulkNoReplyAndNoAnswer(t *testing.T) {
	srv := runNATS(t)
	f := startFakeDaemon(t, srv.ClientURL(), 100)
	code, stdout, stderr := runCmd(t, "publish", "-nats", srv.ClientURL(), "-downstream", "printer", "-n", "5", "-bulk", "2", "-no-reply")
	if code != exitOK || !strings.Contains(stdout, "published (no reply requested) 5 of 5 jobs to shaper.bulk.printer") {
		t.Errorf("-no-reply: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	for deadline := time.Now().Add(5 * time.Second); len(f.bulkRequests()) < 3 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if b := f.bulkRequests(); len(b) != 3 || b[0].reply {
		t.Errorf("bulk requests %+v, want 3 without a reply subject", b)
	}
	code, stdout, stderr = runCmd(t, "publish", "-nats", srv.ClientURL(), "-downstream", "nobody", "-n", "3", "-bulk", "2")
	if code != exitFailed || !strings.Contains(stdout, "no answer       3  no_responders=3") ||
		!strings.Contains(stderr, "3 of 3 jobs got no answer (no_responders=3)") {
		t.Errorf("nobody: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

// A request rejected whole counts each of its jobs rejected for its reason.
func TestPublishBulkRejectedWhole(t *testing.T) {
	srv := runNATS(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Subscribe("shaper.bulk.gone", func(m *nats.Msg) {
		reply := nats.NewMsg(m.Reply)
		reply.Header.Set("Shaper-Status", "rejected")
		reply.Header.Set("Shaper-Reason", "unknown_downstream")
		reply.Data = []byte(`{"status":"rejected","reason":"unknown_downstream","error":"no downstream gone"}`)
		_ = m.RespondMsg(reply)
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCmd(t, "publish", "-nats", srv.ClientURL(), "-downstream", "gone", "-n", "3", "-bulk", "2")
	if code != exitOK || !strings.Contains(stdout, "rejected        3  unknown_downstream=3") {
		t.Errorf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

// -rate counts jobs: 11 jobs at 100/s in requests of 5 leave at 0, 50 and
// 100 ms, a send rate of about 100 jobs/s.
func TestPublishBulkPacing(t *testing.T) {
	srv := runNATS(t)
	startFakeDaemon(t, srv.ClientURL(), 100)
	code, stdout, stderr := runCmd(t, "publish", "-nats", srv.ClientURL(), "-downstream", "printer", "-n", "11", "-rate", "100/s",
		"-bulk", "5", "-json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr: %s", code, stderr)
	}
	var s publishSummary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if s.Accepted != 11 || s.Subject != "shaper.bulk.printer" || s.WallSeconds < 0.1 || s.SendRate > 101 || s.SendRate < 40 {
		t.Errorf("summary %+v; want 11 accepted in >= 0.1s at about 100/s", s)
	}
}

func TestBulkSendRate(t *testing.T) {
	ms := time.Millisecond
	var results []jobResult
	for k, n := range []int{5, 5, 2} { // requests at 0, 100 and 200 ms
		for range n {
			results = append(results, jobResult{Sent: true, SentAt: time.Duration(k) * 100 * ms})
		}
	}
	results = append(results, jobResult{Err: "not_sent"})
	if got := bulkSendRate(results); got < 49.99 || got > 50.01 {
		t.Errorf("bulkSendRate = %v, want 50: 10 jobs before the last request, over 200 ms", got)
	}
	if got := bulkSendRate(results[:5]); got != 0 {
		t.Errorf("one request: %v, want 0 (n/a)", got)
	}
}

func TestPublishBulkUsage(t *testing.T) {
	base := []string{"publish", "-downstream", "p"}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-bulk", "-1"}, "-bulk must be 1..10000 jobs a request"},
		{[]string{"-bulk", "10001"}, "-bulk must be 1..10000 jobs a request"},
		{[]string{"-atomic"}, "-atomic needs -bulk N"},
		{[]string{"-bulk", "10", "-wait"}, "-bulk and -wait exclude each other"},
		{[]string{"-bulk", "10", "-bulk-prefix", "a b"}, `-bulk-prefix "a b" is not a subject prefix`},
	}
	for _, tt := range tests {
		code, _, stderr := runCmd(t, append(base, tt.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want a usage error naming %q", tt.args, code, stderr, tt.want)
		}
	}
	code, stdout, stderr := runCmd(t, "publish", "-h")
	for _, want := range []string{"-bulk N", "-rate still counts jobs, -concurrency requests", "-rate 2000/s -bulk 100"} {
		if code != exitOK || !strings.Contains(stdout+stderr, want) {
			t.Errorf("publish -h: exit %d, lacks %q", code, want)
		}
	}
}
