package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/shaper/outcome"
)

func TestPublishWait(t *testing.T) {
	srv := runNATS(t)
	startFakeDaemon(t, srv.ClientURL(), 100)
	base := []string{"publish", "-nats", srv.ClientURL(), "-downstream", "printer", "-wait"}
	code, stdout, stderr := runCmd(t, append(base, "-n", "6", "-keys", "3", "-v")...)
	if code != exitOK {
		t.Fatalf("exit %d, stderr: %s", code, stderr)
	}
	t.Log("\n" + stdout)
	for _, want := range []string{
		"  accepted        4", "  rejected        2  rate_limited=2",
		"  ended           4  succeeded=4\n", "  no outcome      0\n",
		"  latency            p50 0.", "(accepted→ended, from send)",
		"OUTCOME", "succeeded (200)",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q", want)
		}
	}

	code, stdout, stderr = runCmd(t, append(base, "-n", "2", "-payload", "fail {i}", "-json")...)
	var s publishSummary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil || code != exitOK {
		t.Fatalf("exit %d, %v\nstdout: %s\nstderr: %s", code, err, stdout, stderr)
	}
	if s.Outcomes["failed"] != 2 || s.NoOutcome != 0 || s.Latency == nil || s.Latency.P99 < s.Latency.P50 {
		t.Errorf("failed jobs: %+v", s.outcomeSummary)
	}

	// An outcome that never comes: no outcome, exit 1.
	code, stdout, stderr = runCmd(t, append(base, "-payload", "lose", "-wait-timeout", "300ms")...)
	if code != exitFailed || !strings.Contains(stdout, "no outcome      1  timeout=1") ||
		!strings.Contains(stderr, "1 of 1 accepted jobs did not end within -wait-timeout 300ms (timeout=1)") {
		t.Errorf("lost outcome: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	code, _, stderr = runCmd(t, append(base, "-no-reply")...)
	if code != exitUsage || !strings.Contains(stderr, "-wait and -no-reply exclude each other") {
		t.Errorf("-wait -no-reply: exit %d, stderr %q", code, stderr)
	}
}

func TestPercentile(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if p := percentile(xs, 0.5); p != 5 {
		t.Errorf("p50 = %v, want 5", p)
	}
	if p := percentile(xs, 0.99); p != 10 {
		t.Errorf("p99 = %v, want 10", p)
	}
	if p := percentile([]float64{3}, 0.5); p != 3 {
		t.Errorf("p50 of one = %v", p)
	}
}

// statusResponder answers status look-ups on shaper.status.pay.* with
// rec for its id, unknown for any other.
func statusResponder(t *testing.T, url string, rec outcome.Record) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	_, err = nc.Subscribe("shaper.status.pay.*", func(m *nats.Msg) {
		id := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
		r := nats.NewMsg(m.Reply)
		var body any = map[string]string{"job_id": id, "state": "unknown"}
		r.Header.Set("Shaper-State", "unknown")
		if id == rec.JobID {
			body = rec
			r.Header.Set("Shaper-State", string(rec.State))
		}
		r.Data, _ = json.Marshal(body)
		_ = m.RespondMsg(r)
	})
	if err == nil {
		err = nc.Flush()
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestJob(t *testing.T) {
	srv := runNATS(t)
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := outcome.Record{JobID: "j1", Downstream: "pay", State: outcome.Failed, Attempts: 3,
		AcceptedAt: at, StartedAt: at.Add(2 * time.Second), EndedAt: at.Add(2500 * time.Millisecond),
		Error: "downstream answered 500 Internal Server Error", DeadLetterSeq: 7, BatchID: "b7",
		Result: &outcome.Result{StatusCode: 500, Headers: map[string]string{"Content-Type": "text/plain"},
			Body: []byte("boom"), Bytes: 10, Truncated: true}}
	statusResponder(t, srv.ClientURL(), rec)
	url := srv.ClientURL()

	code, stdout, stderr := runCmd(t, "job", "-nats", url, "-downstream", "pay", "j1")
	if code != exitOK {
		t.Fatalf("exit %d, stderr: %s", code, stderr)
	}
	t.Log("\n" + stdout)
	for _, want := range []string{"job id:      j1\n", "state:       failed\n", "attempts:    3\n",
		"accepted:    2030-01-02T03:04:05Z\n", "ended:       2030-01-02T03:04:07.5Z\n", "took:        2.500s (accepted → ended)\n",
		"error:       downstream answered 500", "dead letter: seq 7 (shaperctl dead show -downstream pay -seq 7)",
		"batch:       b7 (the call that carried its last try)\n",
		"answer:      HTTP 500, 10 bytes\n", "header:      Content-Type: text/plain\n", "body (the first 4 of 10 bytes):\nboom\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}

	// The id may come first; -json prints the record.
	code, stdout, _ = runCmd(t, "job", "j1", "-nats", url, "-downstream", "pay", "-json")
	var got outcome.Record
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != exitOK || got.State != outcome.Failed ||
		string(got.Result.Body) != "boom" || !strings.Contains(stdout, "\n  \"state\": \"failed\"") {
		t.Errorf("-json: exit %d, %v\n%s", code, err, stdout)
	}

	failures := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown", []string{"-downstream", "pay", "nope"}, exitFailed, "no record of job nope of downstream pay: it was never accepted there"},
		{"nobody answers", []string{"-downstream", "pay", "-status-prefix", "other", "j1"}, exitFailed,
			"no shaperd answers status look-ups on other.pay.j1"},
		{"no downstream", []string{"j1"}, exitUsage, "-downstream is required"},
		{"no id", []string{"-downstream", "pay"}, exitUsage, "say which job"},
		{"two ids", []string{"-downstream", "pay", "j1", "j2"}, exitUsage, `unexpected argument "j2"`},
		{"bad id", []string{"-downstream", "pay", "a.b"}, exitUsage, `"a.b" is not a job id`},
	}
	for _, tt := range failures {
		code, stdout, stderr := runCmd(t, append([]string{"job", "-nats", url}, tt.args...)...)
		if code != tt.code || !strings.Contains(stderr, tt.want) || stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %d and %q", tt.name, code, stdout, stderr, tt.code, tt.want)
		}
	}
	if code, _, stderr := runCmd(t, "job", "-h"); code != exitOK || !strings.Contains(stderr, "shaperctl job -downstream printer") {
		t.Errorf("job -h: exit %d, %s", code, stderr)
	}
}

// runJetStream starts an in-process NATS server with JetStream.
func runJetStream(t *testing.T) *server.Server {
	t.Helper()
	opts := natsserver.DefaultTestOptions
	opts.Port, opts.JetStream, opts.StoreDir = -1, true, t.TempDir()
	srv := natsserver.RunServer(&opts)
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv
}

// eventMsg is an event as shaperd publishes it.
func eventMsg(id string, state outcome.State, attempt int, errText string) *nats.Msg {
	rec := outcome.Record{JobID: id, Downstream: "pay", State: state, Attempts: attempt, Error: errText}
	m := nats.NewMsg("shaper.events.pay." + string(state))
	m.Header.Set("Shaper-Job-Id", id)
	m.Header.Set("Shaper-State", string(state))
	m.Header.Set("Shaper-Attempt", string(rune('0'+attempt)))
	m.Data, _ = json.Marshal(rec)
	return m
}

func TestWatchLive(t *testing.T) {
	srv := runNATS(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, stdout, stderr := runCmd(t, "watch", "-nats", srv.ClientURL(), "-downstream", "pay", "-count", "2")
		done <- result{code, stdout, stderr}
	}()
	// Publish until watch has seen two: it subscribes at some point.
	var r result
	for tick := time.NewTicker(20 * time.Millisecond); ; <-tick.C {
		_ = nc.PublishMsg(eventMsg("j1", outcome.Retrying, 1, "downstream answered 503"))
		select {
		case r = <-done:
		default:
			continue
		}
		tick.Stop()
		break
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != exitOK || len(lines) != 2 || !strings.Contains(lines[0], "  j1  ") ||
		!strings.Contains(lines[0], "  retrying   attempt 1  downstream answered 503") {
		t.Errorf("exit %d, stderr %q, lines %q", r.code, r.stderr, lines)
	}
	if _, err := time.Parse("2006-01-02T15:04:05.000Z", lines[0][:24]); err != nil {
		t.Errorf("line %q does not start with the time: %v", lines[0], err)
	}
}

func TestWatchSince(t *testing.T) {
	srv := runJetStream(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SHAPER_EVENTS_pay", Subjects: []string{"shaper.events.pay.*"}}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*nats.Msg{eventMsg("j1", outcome.Queued, 0, ""), eventMsg("j1", outcome.Started, 1, ""),
		eventMsg("j1", outcome.Failed, 1, "downstream answered 500")} {
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	code, stdout, stderr := runCtx(wctx, "watch", "-nats", srv.ClientURL(), "-downstream", "pay", "-since", "1h", "-count", "3", "-json")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != exitOK || len(lines) != 3 || !strings.Contains(lines[0], `"state":"queued"`) || !strings.Contains(lines[2], `"state":"failed"`) {
		t.Fatalf("exit %d, stderr %q, lines %q", code, stderr, lines)
	}

	code, _, stderr = runCmd(t, "watch", "-nats", srv.ClientURL(), "-downstream", "other", "-since", "1h")
	if code != exitFailed || !strings.Contains(stderr, "no stream holds shaper.events.other.*: is other a memory downstream") {
		t.Errorf("no stream: exit %d, stderr %q", code, stderr)
	}
	plain := runNATS(t)
	code, _, stderr = runCmd(t, "watch", "-nats", plain.ClientURL(), "-downstream", "pay", "-since", "1h", "-timeout", "1s")
	if code != exitFailed || !strings.Contains(stderr, "-since reads stored events from JetStream, which did not answer") {
		t.Errorf("no JetStream: exit %d, stderr %q", code, stderr)
	}
	for _, args := range [][]string{{"-since", "-1s"}, {"-count", "-1"}, {}} {
		code, _, stderr := runCmd(t, append([]string{"watch", "-downstream", "pay"}, args...)...)
		if len(args) == 0 {
			code, _, stderr = runCmd(t, "watch")
		}
		if code != exitUsage || !strings.Contains(stderr, "see 'shaperctl watch -h'") {
			t.Errorf("watch %v: exit %d, stderr %q", args, code, stderr)
		}
	}
}
