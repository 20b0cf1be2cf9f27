package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
)

// runNATS starts an in-process NATS server on a random port.
func runNATS(t *testing.T) *server.Server {
	t.Helper()
	opts := natsserver.DefaultTestOptions
	opts.Port = -1
	srv := natsserver.RunServer(&opts)
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv
}

// fakeDaemon answers jobs on shaper.jobs.printer per docs/protocol.md: a queue of
// capacity slots (queue_full beyond, Retry-After 1), key-2 is rate limited
// (Retry-After 3), and a repeated Nats-Msg-Id is an accepted duplicate. A
// new job with Shaper-Reply-To ends at once and gets its outcome there:
// failed with a 500 when its payload says "fail", none at all when it
// says "lose", else succeeded with a 200. Bulk requests on
// shaper.bulk.printer are answered job by job the same way (see
// handleBulk).
type fakeDaemon struct {
	nc       *nats.Conn
	mu       sync.Mutex
	capacity int
	queued   int
	ids      map[string]string
	headers  []nats.Header // each job's, a bulk job's merged with its request's
	payloads []string      // each job's
	bulk     []bulkSeen    // each bulk request
}

func startFakeDaemon(t *testing.T, url string, capacity int) *fakeDaemon {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	f := &fakeDaemon{nc: nc, capacity: capacity, ids: map[string]string{}}
	if _, err := nc.Subscribe("shaper.jobs.printer", f.handle); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Subscribe("shaper.bulk.printer", f.handleBulk); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fakeDaemon) handle(m *nats.Msg) {
	f.mu.Lock()
	defer f.mu.Unlock()
	body, jobID := f.job(m.Header, m.Data)
	reply := nats.NewMsg(m.Reply)
	reply.Header.Set("Shaper-Status", body["status"].(string))
	if reason, ok := body["reason"].(string); ok {
		reply.Header.Set("Shaper-Reason", reason)
		reply.Header.Set("Retry-After", strconv.Itoa(body["retry_after_seconds"].(int)))
	}
	reply.Data, _ = json.Marshal(body)
	_ = m.RespondMsg(reply)
	if jobID != "" {
		f.end(jobID, m)
	}
}

// job answers one job, with headers h and payload data, and returns its
// reply body and, when it was queued, its job id. f.mu must be held.
func (f *fakeDaemon) job(h nats.Header, data []byte) (map[string]any, string) {
	f.headers = append(f.headers, h)
	f.payloads = append(f.payloads, string(data))
	id := h.Get("Nats-Msg-Id")
	switch {
	case id != "" && f.ids[id] != "":
		return map[string]any{"status": "accepted", "downstream": "printer", "job_id": f.ids[id], "duplicate": true}, ""
	case h.Get("Shaper-Key") == "key-2":
		return map[string]any{"status": "rejected", "reason": "rate_limited", "retry_after_seconds": 3, "error": "key over its limit"}, ""
	case f.queued >= f.capacity:
		return map[string]any{"status": "rejected", "reason": "queue_full", "retry_after_seconds": 1,
			"error": fmt.Sprintf("queue printer is full (%d/%d)", f.queued, f.capacity)}, ""
	}
	f.queued++
	jobID := "job-" + strconv.Itoa(f.queued)
	if id != "" {
		f.ids[id] = jobID
	}
	return map[string]any{"status": "accepted", "downstream": "printer", "job_id": jobID,
		"position": f.queued, "eta_seconds": float64(f.queued) / 2}, jobID
}

// end publishes the outcome of job id, sent as m, on its Shaper-Reply-To.
func (f *fakeDaemon) end(id string, m *nats.Msg) {
	rt := m.Header.Get("Shaper-Reply-To")
	if rt == "" || strings.Contains(string(m.Data), "lose") {
		return
	}
	out := nats.NewMsg(rt)
	out.Header.Set("Shaper-Job-Id", id)
	out.Header.Set("Shaper-Attempt", "1")
	out.Header.Set("Shaper-State", "succeeded")
	out.Header.Set("Shaper-Status-Code", "200")
	if strings.Contains(string(m.Data), "fail") {
		out.Header.Set("Shaper-State", "failed")
		out.Header.Set("Shaper-Status-Code", "500")
		out.Header.Set("Shaper-Error", "downstream answered 500")
	}
	_ = f.nc.PublishMsg(out)
}

func TestPublishSummary(t *testing.T) {
	srv := runNATS(t)
	startFakeDaemon(t, srv.ClientURL(), 10)
	code, stdout, stderr := runCmd(t, "publish", "-nats", srv.ClientURL(), "-downstream", "printer", "-n", "15", "-concurrency", "1")
	if code != exitOK {
		t.Fatalf("exit %d, stderr: %s", code, stderr)
	}
	t.Log("\n" + stdout)
	for _, want := range []string{
		"published 15 of 15 jobs to shaper.jobs.printer in ",
		"as fast as possible",
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
}

func TestPublishKeysDuplicatesAndHeaders(t *testing.T) {
	srv := runNATS(t)
	f := startFakeDaemon(t, srv.ClientURL(), 100)
	args := []string{"publish", "-nats", srv.ClientURL(), "-downstream", "printer", "-n", "9", "-keys", "3",
		"-msg-id-prefix", "run1-", "-max-wait", "30s", "-payload", "job {i}", "-v"}
	code, stdout, stderr := runCmd(t, args...)
	if code != exitOK {
		t.Fatalf("exit %d, stderr: %s", code, stderr)
	}
	t.Log("\n" + stdout)
	for _, want := range []string{"accepted        6", "rejected        3  rate_limited=3", "retry-after        3s×3",
		"JOB  KEY    STATUS", "2    key-2  rejected"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("first run lacks %q", want)
		}
	}
	h := f.headers[0]
	if h.Get("Shaper-Max-Wait") != "30s" || !strings.HasPrefix(h.Get("Nats-Msg-Id"), "run1-") || !strings.HasPrefix(h.Get("Shaper-Key"), "key-") {
		t.Errorf("request headers = %v", h)
	}
	// The same ids again: every accepted job is a duplicate.
	_, stdout, _ = runCmd(t, args...)
	if !strings.Contains(stdout, "duplicates      6") || !strings.Contains(stdout, "accepted (duplicate)") {
		t.Errorf("second run should report 6 duplicates:\n%s", stdout)
	}
}

func TestPublishJSONAndPacing(t *testing.T) {
	srv := runNATS(t)
	startFakeDaemon(t, srv.ClientURL(), 100)
	code, stdout, stderr := runCmd(t, "publish", "-nats", srv.ClientURL(), "-downstream", "printer", "-n", "11", "-rate", "100/s", "-json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr: %s", code, stderr)
	}
	var s publishSummary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if s.Accepted != 11 || s.Rejected != 0 || s.NoAnswer != 0 || s.TargetRate != 100 {
		t.Errorf("summary = %+v", s)
	}
	// 11 sends at 100/s span 100 ms: the schedule bounds the achieved rate.
	if s.WallSeconds < 0.1 || s.SendRate > 101 || s.SendRate < 40 {
		t.Errorf("wall %.3fs, send rate %.1f/s; want >= 0.1s and about 100/s", s.WallSeconds, s.SendRate)
	}
}

func TestPublishNoAnswer(t *testing.T) {
	srv := runNATS(t)
	// A subscriber that never replies, so requests time out.
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Subscribe("shaper.jobs.silent", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, downstream, want string
	}{
		{"no responders", "nobody", "no_responders=3"},
		{"timeout", "silent", "timeout=3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, "publish", "-nats", srv.ClientURL(), "-downstream", tt.downstream, "-n", "3", "-timeout", "200ms")
			if code != exitFailed {
				t.Errorf("exit %d, want %d", code, exitFailed)
			}
			if !strings.Contains(stdout, "no answer       3  "+tt.want) {
				t.Errorf("summary lacks %q:\n%s", tt.want, stdout)
			}
			if !strings.Contains(stderr, "3 of 3 jobs got no answer ("+tt.want+"): is shaperd running? is -nats right?") {
				t.Errorf("stderr = %q", stderr)
			}
		})
	}
}

func TestPublishNoReplyAndUnreachable(t *testing.T) {
	srv := runNATS(t)
	code, stdout, stderr := runCmd(t, "publish", "-nats", srv.ClientURL(), "-downstream", "printer", "-n", "5", "-no-reply")
	if code != exitOK || !strings.Contains(stdout, "published (no reply requested) 5 of 5 jobs") {
		t.Errorf("-no-reply: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	code, _, stderr = runCmd(t, "publish", "-nats", "nats://127.0.0.1:1", "-downstream", "printer", "-timeout", "500ms")
	if code != exitFailed || !strings.Contains(stderr, "cannot connect to NATS at nats://127.0.0.1:1") ||
		!strings.Contains(stderr, "is shaperd running? is -nats right?") {
		t.Errorf("unreachable: exit %d, stderr %q", code, stderr)
	}
}

func TestPublishInterrupted(t *testing.T) {
	srv := runNATS(t)
	startFakeDaemon(t, srv.ClientURL(), 100)
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
	defer cancel()
	code, stdout, _ := runCtx(ctx, "publish", "-nats", srv.ClientURL(), "-downstream", "printer", "-n", "100", "-rate", "20/s")
	if code != exitFailed || !strings.Contains(stdout, "not_sent=") {
		t.Errorf("exit %d, want 1 with not_sent jobs:\n%s", code, stdout)
	}
}

func TestScheduleAt(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		k    int
		rate float64
		want time.Duration
	}{
		{0, 50, 0},
		{1, 50, 20 * time.Millisecond},
		{50, 50, time.Second},
		{3, 0.5, 6 * time.Second},
		{99, 2.5, 39600 * time.Millisecond}, // rounded, not truncated to 39.599999999s
	}
	for _, tt := range tests {
		if got := scheduleAt(t0, tt.k, tt.rate).Sub(t0); got != tt.want {
			t.Errorf("scheduleAt(k=%d, rate=%v) = %v, want %v", tt.k, tt.rate, got, tt.want)
		}
	}
}

// TestPublishScheduleFlags: -priority, -delay and -not-before send their
// headers; bad values and -delay with -not-before are usage errors.
func TestPublishScheduleFlags(t *testing.T) {
	srv := runNATS(t)
	f := startFakeDaemon(t, srv.ClientURL(), 100)
	base := []string{"publish", "-nats", srv.ClientURL(), "-downstream", "printer"}
	if code, _, stderr := runCmd(t, append(base, "-priority", "2", "-delay", "1500ms")...); code != exitOK {
		t.Fatalf("exit %d, stderr: %s", code, stderr)
	}
	at := "2030-01-02T15:04:05.25Z"
	if code, _, stderr := runCmd(t, append(base, "-not-before", at)...); code != exitOK {
		t.Fatalf("exit %d, stderr: %s", code, stderr)
	}
	f.mu.Lock()
	h0, h1 := f.headers[0], f.headers[1]
	f.mu.Unlock()
	if h0.Get("Shaper-Priority") != "2" || h0.Get("Shaper-Delay") != "1.5s" || h0.Get("Shaper-Not-Before") != "" {
		t.Errorf("headers with -priority 2 -delay 1500ms: %v", h0)
	}
	if h1.Get("Shaper-Not-Before") != at || h1.Get("Shaper-Priority") != "" || h1.Get("Shaper-Delay") != "" {
		t.Errorf("headers with -not-before: %v", h1)
	}
	bad := []struct {
		args []string
		want string
	}{
		{[]string{"-priority", "10"}, "-priority must be 0..9"},
		{[]string{"-priority", "-2"}, "-priority must be 0..9"},
		{[]string{"-delay", "-1s"}, "-delay must be positive"},
		{[]string{"-not-before", "tomorrow"}, `-not-before "tomorrow" is not an RFC 3339 time`},
		{[]string{"-delay", "1s", "-not-before", at}, "-delay and -not-before exclude each other"},
	}
	for _, tc := range bad {
		code, _, stderr := runCmd(t, append(base, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want a usage error naming %q", tc.args, code, stderr, tc.want)
		}
	}
}
