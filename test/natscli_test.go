package test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The manual's "Producing jobs with the nats CLI" (docs/producers.md)
// proven against a real daemon with the real nats CLI: every command below
// appears verbatim on that page, and every nats command shown in README.md
// or docs/ is one of them (TestNatsCLICommandsInDocs); TestNatsCLI runs each
// one as a subprocess against the daemon the docs start — deploy/example.yaml
// as it is, only the NATS URL, the admin address and the printer's URL set
// by env to the test's server, port and downstream.

const (
	natscliModule  = "github.com/nats-io/natscli/nats"
	natscliVersion = "v0.5.0"

	// cliDocPage is the page that shows every command below, as written.
	cliDocPage = "../docs/producers.md"

	// docServer is the server flag of every documented command; the test
	// swaps in its own server's URL.
	docServer = "-s nats://127.0.0.1:4222"

	// docDaemon is the documented daemon (the README's first command);
	// docBenchDaemon is it with room for a bench burst (env before the
	// command, as a shell takes it).
	docDaemon      = "go run ./cmd/shaperd -config deploy/example.yaml"
	docBenchDaemon = "SHAPER_DOWNSTREAMS_PRINTER_QUEUE_CAPACITY=1000 SHAPER_DOWNSTREAMS_PRINTER_ADMISSION_BURST=1000 SHAPER_DOWNSTREAMS_PRINTER_QUEUE_MAX_COST=5 " + docDaemon
)

// cliStep is one documented command and what it must do.
type cliStep struct {
	name string
	cmd  string // verbatim in cliDocPage
	// sub, if set, is a documented command started before cmd that must end by
	// itself once cmd has run (nats sub --count 1); its output goes to check.
	sub   string
	runs  int                                 // how often cmd runs in a row; 0 = once
	idle  bool                                // wait until the printer's queue is empty first
	check func(*testing.T, *cliEnv, []cliRun) // the runs of cmd, then sub's
}

// cliRun is one finished nats command.
type cliRun struct {
	stdout, stderr string
	code           int
}

func (r cliRun) String() string {
	return fmt.Sprintf("exit %d\n-- stdout:\n%s\n-- stderr:\n%s", r.code, r.stdout, r.stderr)
}

// exampleSteps run against docDaemon, in order.
var exampleSteps = []cliStep{
	{name: "request accepted", cmd: `nats req shaper.jobs.printer '{"doc":1}' -H Shaper-Key:acme -s nats://127.0.0.1:4222`,
		check: func(t *testing.T, e *cliEnv, r []cliRun) {
			b := onlyReply(t, r[0], "accepted")
			if b.JobID == "" || b.Downstream != "printer" {
				t.Errorf("accepted reply lacks job_id or downstream:\n%s", r[0])
			}
			if h := e.waitBody(t, `{"doc":1}`); h.jobID != b.JobID {
				t.Errorf("printer got job %q, the reply said %q", h.jobID, b.JobID)
			}
		}},
	{name: "Nats-Msg-Id twice", runs: 2, cmd: `nats req shaper.jobs.printer '{"doc":2}' -H Shaper-Key:acme -H Nats-Msg-Id:doc-2 -s nats://127.0.0.1:4222`,
		check: func(t *testing.T, e *cliEnv, r []cliRun) {
			first, again := onlyReply(t, r[0], "accepted"), onlyReply(t, r[1], "accepted")
			if first.Duplicate || !again.Duplicate || again.JobID != first.JobID {
				t.Errorf("want the second reply duplicate with the first's job_id:\n%s\n%s", r[0], r[1])
			}
		}},
	{name: "Shaper-Max-Wait", cmd: `nats req shaper.jobs.printer '{"doc":3}' -H Shaper-Key:acme -H Shaper-Max-Wait:30s -s nats://127.0.0.1:4222`,
		check: func(t *testing.T, e *cliEnv, r []cliRun) {
			onlyReply(t, r[0], "accepted")
			e.waitBody(t, `{"doc":3}`)
		}},
	{name: "Shaper-Cost above max_cost", cmd: `nats req shaper.jobs.printer '{"pages":40}' -H Shaper-Key:acme -H Shaper-Cost:3 -s nats://127.0.0.1:4222`,
		check: func(t *testing.T, e *cliEnv, r []cliRun) {
			b := onlyReply(t, r[0], "rejected")
			wantHeader(t, r[0], "Shaper-Reason: bad_request")
			if !strings.Contains(b.Error, "queue.max_cost 1") {
				t.Errorf("error does not name queue.max_cost 1:\n%s", r[0])
			}
		}},
	{name: "unknown downstream", cmd: `nats req shaper.jobs.nosuch '{"doc":1}' -s nats://127.0.0.1:4222`,
		check: func(t *testing.T, e *cliEnv, r []cliRun) {
			b := onlyReply(t, r[0], "rejected")
			wantHeader(t, r[0], "Shaper-Reason: unknown_downstream")
			if b.Reason != "unknown_downstream" || b.Error == "" {
				t.Errorf("want reason unknown_downstream and an error:\n%s", r[0])
			}
		}},
	{name: "burst into a full queue", idle: true, cmd: `nats req shaper.jobs.printer '{"doc":{{Count}}}' --count 15 -H Shaper-Key:acme -s nats://127.0.0.1:4222`,
		check: checkQueueFull},
	{name: "plain publish", cmd: `nats pub shaper.jobs.printer '{"doc":5}' -H Shaper-Key:acme -s nats://127.0.0.1:4222`,
		check: func(t *testing.T, e *cliEnv, r []cliRun) {
			if r[0].code != 0 || !strings.Contains(r[0].stderr, `Published 9 bytes to "shaper.jobs.printer"`) {
				t.Errorf("nats pub:\n%s", r[0])
			}
			e.waitBody(t, `{"doc":5}`)
		}},
	{name: "plain publish rejected: dead letter", sub: `nats sub shaper.dead.printer --count 1 -s nats://127.0.0.1:4222`,
		cmd:   `nats pub shaper.jobs.printer '{"pages":40}' -H Shaper-Key:acme -H Shaper-Cost:3 -s nats://127.0.0.1:4222`,
		check: checkDeadLetter},
	{name: "Shaper-Reply-To: the outcome", sub: `nats sub shaper.outcomes.demo --count 1 -s nats://127.0.0.1:4222`,
		cmd:   `nats req shaper.jobs.printer '{"doc":6}' -H Shaper-Key:acme -H Shaper-Reply-To:shaper.outcomes.demo -s nats://127.0.0.1:4222`,
		check: checkOutcome},
	{name: "bulk request from an NDJSON file", idle: true, cmd: `nats req shaper.bulk.printer --force-stdin -H Shaper-Key:acme -s nats://127.0.0.1:4222 < deploy/orders.ndjson`,
		check: checkBulk},
	{name: "status of a job never seen", cmd: `nats req shaper.status.printer.no-such-job '' -s nats://127.0.0.1:4222`,
		check: func(t *testing.T, e *cliEnv, r []cliRun) {
			wantHeader(t, r[0], "Shaper-State: unknown")
			if r[0].code != 0 || strings.TrimSpace(r[0].stdout) != `{"job_id":"no-such-job","state":"unknown"}` {
				t.Errorf("want the unknown answer:\n%s", r[0])
			}
		}},
}

// checkBulk checks the documented bulk request: the three orders of the
// file accepted in one reply, in order, and delivered byte for byte.
func checkBulk(t *testing.T, e *cliEnv, r []cliRun) {
	wantHeader(t, r[0], "Shaper-Status: accepted")
	wantHeader(t, r[0], "Shaper-Accepted: 3")
	var b struct {
		Status string `json:"status"`
		Jobs   []struct {
			Index int    `json:"index"`
			JobID string `json:"job_id"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(r[0].stdout)), &b); err != nil || b.Status != "accepted" || len(b.Jobs) != 3 {
		t.Fatalf("want one accepted reply for 3 jobs (%v):\n%s", err, r[0])
	}
	for i, order := range []string{`{"order": 1001, "sku": "A-17", "qty": 2}`, `{"order": 1002, "sku": "B-03", "qty": 1}`, `{"order": 1003, "sku": "A-17", "qty": 5}`} {
		if h := e.waitBody(t, order); b.Jobs[i].Index != i || h.jobID != b.Jobs[i].JobID {
			t.Errorf("order %d: printer got job %q, the reply said %+v", i, h.jobID, b.Jobs[i])
		}
	}
}

// checkOutcome checks the documented Shaper-Reply-To example: the accept
// reply first, then the outcome of that job on the subject it named, with
// the printer's answer (200, no body) in its headers.
func checkOutcome(t *testing.T, e *cliEnv, r []cliRun) {
	req, sub := r[0], r[1]
	b := onlyReply(t, req, "accepted")
	for _, want := range []string{`Received on "shaper.outcomes.demo"`, "Shaper-Job-Id: " + b.JobID,
		"Shaper-State: succeeded", "Shaper-Attempt: 1", "Shaper-Status-Code: 200"} {
		if !strings.Contains(sub.stdout, want) {
			t.Errorf("nats sub lacks %q:\n%s", want, sub)
		}
	}
}

// benchSteps run against docBenchDaemon, in order.
var benchSteps = []cliStep{
	{name: "bench service request", cmd: `nats bench service request shaper.jobs.printer --msgs 500 --clients 4 -H Shaper-Key:acme --no-progress -s nats://127.0.0.1:4222`,
		check: checkBench},
	{name: "Shaper-Cost within max_cost", cmd: `nats req shaper.jobs.printer '{"pages":40}' -H Shaper-Key:acme -H Shaper-Cost:3 -s nats://127.0.0.1:4222`,
		check: func(t *testing.T, e *cliEnv, r []cliRun) {
			b := onlyReply(t, r[0], "accepted")
			if b.Position < 450 {
				t.Errorf("position %d: the bench's 500 jobs (less the few drained since) should be ahead of it:\n%s", b.Position, r[0])
			}
		}},
}

func checkQueueFull(t *testing.T, e *cliEnv, r []cliRun) {
	replies := replies(t, r[0])
	if len(replies) != 15 {
		t.Fatalf("%d replies to 15 requests:\n%s", len(replies), r[0])
	}
	accepted, full := 0, 0
	for _, b := range replies {
		switch {
		case b.Status == "accepted":
			accepted++
		case b.Reason == "queue_full" && b.RetryAfter == 1:
			full++
		default:
			t.Errorf("want accepted or queue_full with retry_after_seconds 1 (the printer drains 2/s), got %+v", b)
		}
	}
	// One starts at once and 10 wait; one more fits for each start during the burst.
	if accepted < 10 || full == 0 {
		t.Errorf("accepted %d, queue_full %d: want the 10 of the capacity (and any started) accepted, the rest full:\n%s", accepted, full, r[0])
	}
	wantHeader(t, r[0], "Shaper-Reason: queue_full")
	wantHeader(t, r[0], "Retry-After: 1")
}

func checkDeadLetter(t *testing.T, e *cliEnv, r []cliRun) {
	pub, sub := r[0], r[1]
	if pub.code != 0 {
		t.Fatalf("nats pub:\n%s", pub)
	}
	for _, want := range []string{`Received on "shaper.dead.printer"`, "Shaper-Reason: bad_request",
		"Shaper-Error: job cost 3 is above queue.max_cost 1", `{"pages":40}`} {
		if !strings.Contains(sub.stdout, want) {
			t.Errorf("nats sub lacks %q:\n%s", want, sub)
		}
	}
	// The request above was rejected the same way; only this one is stored.
	series := `shaper_jobs_rejected_total{downstream="printer",reason="bad_request"}`
	if got := e.in.metricReaches(t, series, 2); got != 2 {
		t.Errorf("%s = %v, want 2 (the request and the publish)", series, got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var list struct{ Total int }
		_ = json.Unmarshal([]byte(e.in.get(t, "/v1/downstreams/printer/dead?reason=bad_request", 200)), &list)
		if list.Total == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bad_request dead letters stored, want 1", list.Total)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func checkBench(t *testing.T, e *cliEnv, r []cliRun) {
	if r[0].code != 0 || !strings.Contains(r[0].stdout, "NATS Core NATS service requester aggregated stats") {
		t.Fatalf("nats bench:\n%s", r[0])
	}
	for series, want := range map[string]float64{
		`shaper_jobs_received_total{downstream="printer"}`:                       500,
		`shaper_jobs_accepted_total{downstream="printer"}`:                       500,
		`shaper_jobs_rejected_total{downstream="printer",reason="queue_full"}`:   0,
		`shaper_jobs_rejected_total{downstream="printer",reason="rate_limited"}`: 0,
	} {
		if got := e.in.metric(t, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	e.waitBody(t, string(make([]byte, 128))) // natscli's payload: --size 128B of zero bytes
}

// TestNatsCLICommandsInDocs keeps the docs and the commands this test runs
// the same: each appears in cliDocPage verbatim, and a nats command shown
// anywhere in README.md or docs/ is one this test runs. It needs no natscli.
func TestNatsCLICommandsInDocs(t *testing.T) {
	page, err := os.ReadFile(cliDocPage)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"go install " + natscliModule + "@" + natscliVersion, docDaemon, docBenchDaemon}
	tested := map[string]bool{}
	for _, s := range append(exampleSteps, benchSteps...) {
		want = append(want, s.cmd)
		tested[s.cmd] = true
		if s.sub != "" {
			want = append(want, s.sub)
			tested[s.sub] = true
		}
	}
	for _, cmd := range want {
		if !bytes.Contains(page, []byte(cmd)) {
			t.Errorf("%s lacks the command\n\t%s", cliDocPage, cmd)
		}
	}
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range append(docs, "../README.md") {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			cmd := strings.TrimPrefix(strings.TrimSpace(line), "$ ")
			if strings.HasPrefix(cmd, "nats ") && !tested[cmd] {
				t.Errorf("%s:%d shows a nats command this test does not run:\n\t%s", path, i+1, cmd)
			}
		}
	}
}

// TestNatsCLI runs the documented nats commands against the documented daemon.
// The first run builds natscli (1 to 2 minutes, see natscliBinary); later
// runs reuse it and take about 4 s, mostly the printer draining at 2/s.
func TestNatsCLI(t *testing.T) {
	bin := natscliBinary(t)
	t.Run("example", func(t *testing.T) { runCLISteps(t, bin, docDaemon, exampleSteps) })
	t.Run("bench", func(t *testing.T) { runCLISteps(t, bin, docBenchDaemon, benchSteps) })
}

func runCLISteps(t *testing.T, bin, daemonCmd string, steps []cliStep) {
	e := startExample(t, bin, daemonCmd)
	for _, s := range steps {
		if t.Failed() {
			return // later steps build on earlier ones
		}
		t.Run(s.name, func(t *testing.T) {
			if s.idle {
				e.waitIdle(t)
			}
			var sub *cliProc
			if s.sub != "" {
				sub = e.start(t, s.sub, "Subscribing on")
			}
			var runs []cliRun
			for range max(s.runs, 1) {
				runs = append(runs, e.run(t, s.cmd))
			}
			if sub != nil {
				runs = append(runs, sub.wait(t))
			}
			for i, r := range runs {
				line := s.cmd
				if i == len(runs)-1 && sub != nil {
					line = s.sub
				}
				t.Logf("%s\n%s", line, r)
			}
			s.check(t, e, runs)
		})
	}
}

// cliEnv is a daemon started as the docs start it, its printer and the
// nats CLI pointed at its server.
type cliEnv struct {
	in   *instance
	ds   *downstream
	bin  string
	url  string
	home string // HOME of the nats commands: no natscli context of the user's
}

// startExample runs deploy/example.yaml with the env of daemonCmd (the
// documented daemon line) plus the test's server, admin port and printer.
func startExample(t *testing.T, bin, daemonCmd string) *cliEnv {
	t.Helper()
	srv := runNATS(t)
	ds := newDownstream(t)
	env, _ := strings.CutSuffix(daemonCmd, docDaemon)
	for _, kv := range strings.Fields(env) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("SHAPER_NATS_URL", srv.ClientURL())
	t.Setenv("SHAPER_ADMIN_LISTEN", "127.0.0.1:0")
	t.Setenv("SHAPER_DOWNSTREAMS_PRINTER_SINK_HTTP_URL", ds.URL+"/print")
	example, err := os.ReadFile("../deploy/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	in := startDaemon(t, srv, string(example))
	return &cliEnv{in: in, ds: ds, bin: bin, url: srv.ClientURL(), home: t.TempDir()}
}

// command makes the exec.Cmd of a documented command line: its words, with the
// server flag pointed at the test's server, in an environment without the
// user's natscli contexts or NATS_* settings.
func (e *cliEnv) command(t *testing.T, ctx context.Context, line string) *exec.Cmd {
	t.Helper()
	if strings.Count(line, docServer) != 1 {
		t.Fatalf("command does not end in %q: %s", docServer, line)
	}
	var stdin string // a documented "< FILE": the command reads FILE
	if i := strings.LastIndex(line, " < "); i >= 0 {
		line, stdin = line[:i], line[i+3:]
	}
	words := shellWords(t, strings.Replace(line, docServer, "-s "+e.url, 1))
	if words[0] != "nats" {
		t.Fatalf("not a nats command: %s", line)
	}
	cmd := exec.CommandContext(ctx, e.bin, words[1:]...)
	cmd.WaitDelay = 5 * time.Second
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NATS_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HOME="+e.home, "XDG_CONFIG_HOME="+filepath.Join(e.home, ".config"))
	if stdin != "" {
		f, err := os.Open(filepath.Join("..", stdin)) // documented from the repository's root
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		cmd.Stdin = f
	}
	return cmd
}

// run runs a documented command to its end (within a minute).
func (e *cliEnv) run(t *testing.T, line string) cliRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := e.command(t, ctx, line)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := cliRun{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%s: %v\n%s", line, err, r)
	}
	if ctx.Err() != nil {
		t.Fatalf("%s: still running after a minute\n%s", line, r)
	}
	return r
}

// cliProc is a documented command running in the background.
type cliProc struct {
	line           string
	cmd            *exec.Cmd
	cancel         context.CancelFunc
	stdout, stderr capturedLog
	done           chan error
}

// start starts a documented command and waits until its stderr says ready.
func (e *cliEnv) start(t *testing.T, line, ready string) *cliProc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	p := &cliProc{line: line, cancel: cancel, done: make(chan error, 1)}
	p.cmd = e.command(t, ctx, line)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { p.cancel(); <-p.done })
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.stderr.String(), ready) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %q within 30s: %s", line, ready, p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p
}

// wait waits for a background command to end by itself.
func (p *cliProc) wait(t *testing.T) cliRun {
	t.Helper()
	select {
	case <-p.done:
		p.done <- nil // for the cleanup
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: still running after 30s\n%s", p.line, p.stdout.String())
	}
	return cliRun{stdout: p.stdout.String(), stderr: p.stderr.String(), code: p.cmd.ProcessState.ExitCode()}
}

// waitBody waits until the printer got a request with this body.
func (e *cliEnv) waitBody(t *testing.T, body string) hit {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, h := range e.ds.snapshot() {
			if h.body == body {
				return h
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the printer got no request with body %q within 30s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitIdle waits until the printer's queue is empty and nothing is in
// flight, as /v1/downstreams reads them (the queue's own count).
func (e *cliEnv) waitIdle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st struct {
			Downstreams []struct {
				Name            string
				Depth, Inflight int
			}
		}
		if err := json.Unmarshal([]byte(e.in.get(t, "/v1/downstreams", 200)), &st); err != nil {
			t.Fatal(err)
		}
		if len(st.Downstreams) == 1 && st.Downstreams[0].Depth == 0 && st.Downstreams[0].Inflight == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the printer's queue is not empty after 30s: %+v", st.Downstreams)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// replies decodes the JSON bodies a nats req printed on stdout, in order.
func replies(t *testing.T, r cliRun) []reply {
	t.Helper()
	var out []reply
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	for {
		var b reply
		if err := dec.Decode(&b); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatalf("reply body: %v\n%s", err, r)
		}
		out = append(out, b)
	}
}

// onlyReply checks a nats req printed one reply with this status, in the
// Shaper-Status header and the body.
func onlyReply(t *testing.T, r cliRun, status string) reply {
	t.Helper()
	b := replies(t, r)
	if r.code != 0 || len(b) != 1 || b[0].Status != status {
		t.Fatalf("want one %s reply:\n%s", status, r)
	}
	wantHeader(t, r, "Shaper-Status: "+status)
	return b[0]
}

// wantHeader checks nats req printed a reply header (on stderr, as
// "15:04:05 Name: value").
func wantHeader(t *testing.T, r cliRun, header string) {
	t.Helper()
	if !strings.Contains(r.stderr, " "+header+"\n") {
		t.Errorf("no reply header %q:\n%s", header, r)
	}
}

// shellWords splits a command line as a POSIX shell does for the docs'
// commands: words separated by spaces, single quotes kept literally. Other
// shell syntax is refused, so a documented command that needs it is noticed.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	inWord, quoted := false, false
	for _, c := range line {
		switch {
		case quoted && c == '\'':
			quoted = false
		case quoted:
			w.WriteRune(c)
		case c == '\'':
			quoted, inWord = true, true
		case c == ' ':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case strings.ContainsRune("\"\\$`|&;<>(){}*?~#\t\n", c):
			t.Fatalf("command uses shell syntax %q outside single quotes: %s", c, line)
		default:
			w.WriteRune(c)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unterminated quote: %s", line)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// natscli is the nats CLI built (or found in the cache) once per test run.
var natscli struct {
	once sync.Once
	path string
	skip string // why it could not be had: the module cannot be fetched
	err  error
}

// natscliBinary returns the nats CLI at natscliVersion. It is built with
// `go install module@version` outside this module (go.mod and go.sum are
// not touched), into <user cache dir>/shaper-ci/natscli-v0.5.0/, and reused
// from there by later runs (the directory .ci/run keeps golangci-lint in).
// The first build takes 1 to 2 minutes on the project's 2-core machine
// with empty module and build caches (67 s idle, 105 s while other builds
// ran), 45 s with the modules already downloaded, 5 s with a warm build
// cache; found in the cache it costs one `nats --version` (20 ms).
// If the module cannot be fetched (offline) the test is skipped, saying so.
func natscliBinary(t *testing.T) string {
	t.Helper()
	natscli.once.Do(func() {
		start := time.Now()
		natscli.path, natscli.skip, natscli.err = buildNatscli()
		if natscli.err == nil && natscli.skip == "" {
			t.Logf("natscli %s: %s (%s)", natscliVersion, natscli.path, time.Since(start).Round(time.Millisecond))
		}
	})
	if natscli.err != nil {
		t.Fatal(natscli.err)
	}
	if natscli.skip != "" {
		t.Skip(natscli.skip)
	}
	return natscli.path
}

func buildNatscli() (path, skip string, err error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "shaper-ci", "natscli-"+natscliVersion)
	name := "nats"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	path = filepath.Join(dir, name)
	if out, err := exec.Command(path, "--version").Output(); err == nil && strings.TrimSpace(string(out)) == natscliVersion {
		return path, "", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("natscli cache: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, ".install-")
	if err != nil {
		return "", "", fmt.Errorf("natscli cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "install", natscliModule+"@"+natscliVersion)
	cmd.Dir = tmp // outside this module, whatever GOFLAGS says
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOWORK=off", "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	switch {
	case ctx.Err() != nil:
		return "", "", fmt.Errorf("go install %s@%s: not done in 6 minutes:\n%s", natscliModule, natscliVersion, out)
	case err != nil && fetchFailed(out):
		return "", fmt.Sprintf("natscli %s cannot be fetched (offline?), so the documented nats commands are not run; "+
			"go install %s@%s said:\n%s", natscliVersion, natscliModule, natscliVersion, out), nil
	case err != nil:
		return "", "", fmt.Errorf("go install %s@%s: %v\n%s", natscliModule, natscliVersion, err, out)
	}
	if err := os.Rename(filepath.Join(tmp, name), path); err != nil {
		return "", "", fmt.Errorf("natscli cache: %w", err)
	}
	return path, "", nil
}

// fetchFailed tells a download that could not reach the network (or was
// not allowed to) from a build that failed.
func fetchFailed(out []byte) bool {
	for _, s := range []string{"dial tcp", "no such host", "connection refused", "connection timed out",
		"i/o timeout", "network is unreachable", "TLS handshake timeout", "proxyconnect",
		"Temporary failure in name resolution", "GOPROXY=off", "module lookup disabled"} {
		if bytes.Contains(out, []byte(s)) {
			return true
		}
	}
	return false
}
