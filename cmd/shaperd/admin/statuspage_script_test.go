package admin

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/outcome"
)

// harnessResult is what testdata/statuspage_harness.js prints.
type harnessResult struct {
	Requests []struct {
		Path, Method, Credentials, Body string
		Headers                         map[string]string
	}
	Confirms []string
	Errors   []string
	Polls    []struct {
		Rows      [][]string
		Jobs      []harnessJobs
		Conn      string
		ConnClass string
	}
	JobFetches    [][]string // the jobs requests so far: after the first poll, on opening, after the second poll, after closing and a third
	JobsOpened    []harnessJobs
	Placeholder   string
	OtherControls [][]struct{ Disabled bool }
	AfterReplay   string
	Kept          struct {
		SameInput, Focused bool
		Value              string
		Selection          []int
	}
	AfterBadRate string
}

// harnessJobs is an open "latest jobs" row as the harness saw it.
type harnessJobs struct {
	Above   string     // the name cell of the downstream row above it
	Cells   int        // the row's own cells (message and table)
	Msg     string     // the line above the table
	Table   [][]string // the header's and each job's cell texts
	Classes []string   // the classes of its cells and spans
}

// runPageScript runs the page's script under node (testdata's minimal DOM)
// over the server's real answers, and returns what the harness saw. It
// skips, saying so, where node is not installed.
func runPageScript(t *testing.T, a *testAdmin) harnessResult {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the status page's script is not run here (its markup is checked by the other tests)")
	}
	_, _, page := get(t, a.url+"/")
	_, script, ok := strings.Cut(page, "<script>")
	script, _, ok2 := strings.Cut(script, "</script>")
	if !ok || !ok2 {
		t.Fatal("GET / has no <script>")
	}
	_, _, list := get(t, a.url+"/v1/downstreams")
	_, _, hist := get(t, a.url+"/v1/history")
	answers := map[string]string{"v1/downstreams": list, "v1/history": hist}
	for _, st := range a.lanes.Lanes() {
		path := "v1/downstreams/" + st.Name + "/jobs"
		_, _, answers[path] = get(t, a.url+"/"+path)
	}
	in, err := json.Marshal(map[string]any{"script": script, "get": answers})
	if err != nil {
		t.Fatal(err)
	}
	inFile := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(inFile, in, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, "testdata/statuspage_harness.js", inFile).Output()
	if err != nil {
		t.Fatalf("node statuspage_harness.js: %v\n%s", err, out)
	}
	var res harnessResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("harness output: %v\n%s", err, out)
	}
	return res
}

// TestStatusPageScript runs the page's script: it draws the state and the
// dead-letter cells from /v1/downstreams without errors, and its replay control POSTs
// the typed rate to the downstream's replay route with the page's
// credentials, keeps what was typed across redraws, and shows the answer.
func TestStatusPageScript(t *testing.T) {
	a := deadFixture(t)
	a.lanes.fill("printer", 3)
	if err := a.lanes.edit("erp", func(st *shaper.LaneStatus) {
		st.Delivered = map[shaper.Outcome]uint64{shaper.OutcomeDeadLettered: 4}
		st.Retries = 9
	}); err != nil {
		t.Fatal(err)
	}
	if err := a.lanes.edit("zero", func(st *shaper.LaneStatus) { st.StoreFull = true }); err != nil {
		t.Fatal(err)
	}
	three := 3
	if err := a.lanes.edit("printer", func(st *shaper.LaneStatus) { st.Levels, st.Delayed = []int{1, 0, 2}, &three }); err != nil {
		t.Fatal(err)
	}
	const levels = "by level 1 · 0 · 2; 3 delayed"
	if _, _, page := get(t, a.url+"/"); !strings.Contains(page, `<div class="note levels">`+levels+`</div>`) {
		t.Errorf("the server's rows do not say %q", levels)
	}
	if err := a.lanes.edit("zero", func(st *shaper.LaneStatus) {
		st.Batch = &shaper.BatchStatus{MaxJobs: 10, MaxBytes: 1 << 20, Encoding: "ndjson", Calls: 10, Jobs: 90}
	}); err != nil {
		t.Fatal(err)
	}
	const batch = "calls of ≤10 (ndjson) · mean 9.0 jobs"
	if _, _, page := get(t, a.url+"/"); strings.Count(page, `<div class="note batch">`+batch+`</div>`) != 1 {
		t.Errorf("the server's rows do not say %q once", batch)
	}
	printerJobs(a)
	res := runPageScript(t, a)
	if len(res.Errors) > 0 {
		t.Fatalf("the script threw:\n%s", strings.Join(res.Errors, "\n"))
	}
	checkLatestJobs(t, res)
	if len(res.Polls) != 3 || res.Polls[0].ConnClass != "" || !strings.HasPrefix(res.Polls[0].Conn, "updated ") {
		t.Fatalf("polls %+v", res.Polls)
	}
	dead := map[string]string{}
	for _, row := range res.Polls[0].Rows {
		if len(row) != 10 {
			t.Fatalf("row %q: %d cells, want 10 (the header has 10)", row, len(row))
		}
		if strings.HasPrefix(row[0], "erp") && (!strings.HasPrefix(row[0], "erpfailing4 deliveries failed, none succeeded") ||
			row[3] != "–ok 0 · failed 4 (4 dead-lettered) · retries 9") {
			t.Errorf("erp (4 dead-lettered, no success) drawn %q / %q, want failing with its failures and retries", row[0], row[3])
		}
		if strings.HasPrefix(row[0], "zero") && !strings.HasPrefix(row[0], "zerostore fullthe store is out of space: new jobs are refused until it has room") {
			t.Errorf("zero (its store full) drawn %q, want store full", row[0])
		}
		if strings.HasPrefix(row[0], "zero") != strings.HasSuffix(row[2], batch) {
			t.Errorf("%.10s: starts cell %q; want the batch on zero's only", row[0], row[2])
		}
		if strings.HasPrefix(row[0], "printer") != strings.HasSuffix(row[1], levels) {
			t.Errorf("%.10s: queue cell %q; want the levels and delayed jobs on printer's only", row[0], row[1])
		}
		for _, name := range []string{"erp", "printer", "zero"} {
			if strings.HasPrefix(row[0], name) {
				dead[name] = row[6]
			}
		}
	}
	for name, want := range map[string]string{"erp": "–", "printer": "5 stored · oldest 3h 20mreplay", "zero": "0 storedreplay"} {
		if dead[name] != want {
			t.Errorf("%s: dead-letters cell %q, want %q", name, dead[name], want)
		}
	}
	if res.Placeholder != "12/m" {
		t.Errorf("rate placeholder %q, want the default 12/m (rate 2/s ÷ 10)", res.Placeholder)
	}
	if !slices.EqualFunc(res.OtherControls, [][]struct{ Disabled bool }{{}, {{true}}}, slices.Equal) {
		t.Errorf("other rows' replay buttons %+v, want none for erp (no store) and a disabled one for zero (nothing stored)", res.OtherControls)
	}

	var posts []string
	for _, r := range res.Requests {
		if r.Method == "GET" {
			continue
		}
		if r.Credentials != "same-origin" || r.Headers["Content-Type"] != "application/json" {
			t.Errorf("%s %s: credentials %q, headers %v; want the page's credentials and a JSON body", r.Method, r.Path, r.Credentials, r.Headers)
		}
		posts = append(posts, r.Method+" "+r.Path+" "+r.Body)
	}
	if want := []string{
		`POST v1/downstreams/printer/dead/replay {"rate":"2/s"}`,
		`POST v1/downstreams/printer/dead/replay {"rate":"fast"}`,
	}; !slices.Equal(posts, want) {
		t.Errorf("the replay control sent\n%q\nwant\n%q", posts, want)
	}
	if len(res.Confirms) != 2 || !strings.Contains(res.Confirms[0], "printer (5 now), oldest first, at 2/s?") {
		t.Errorf("confirm prompts %q", res.Confirms)
	}
	if !strings.Contains(res.AfterReplay, "replaying 5") {
		t.Errorf("after a 202 the row reads %q, want it to say replaying 5", res.AfterReplay)
	}
	if k := res.Kept; !k.SameInput || k.Value != "2/s" || !k.Focused || !slices.Equal(k.Selection, []int{1, 3}) {
		t.Errorf("a redraw lost the rate being typed: %+v", k)
	}
	if !strings.Contains(res.AfterBadRate, `replay refused: rate: want N/s, N/m or N/h, got "fast"`) {
		t.Errorf("after a 400 the row reads %q, want the server's message", res.AfterBadRate)
	}
}

// TestStatusPageRuntime: a timed pause, a maintenance window (running and
// next) and an override show in the name cell, the same in the server's
// rows and the script's.
func TestStatusPageRuntime(t *testing.T) {
	a := deadFixture(t) // erp, printer and zero; the harness replays printer's dead letters
	until := time.Date(2030, 1, 2, 6, 0, 0, 0, time.UTC)
	if err := a.lanes.Pause("erp", until, "ops"); err != nil {
		t.Fatal(err)
	}
	start, end := time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	if err := a.lanes.edit("printer", func(st *shaper.LaneStatus) {
		st.Maintenance = &shaper.MaintenanceWindow{Start: start, End: end, Active: true}
	}); err != nil {
		t.Fatal(err)
	}
	next := time.Date(2030, 1, 5, 2, 0, 0, 0, time.UTC) // a Saturday
	if err := a.lanes.edit("zero", func(st *shaper.LaneStatus) {
		st.Maintenance = &shaper.MaintenanceWindow{Start: next, End: next.Add(2 * time.Hour)}
	}); err != nil {
		t.Fatal(err)
	}
	if err := a.lanes.SetOverride("zero", shaper.Override{Rate: 20, Capacity: 50}, "ops"); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"erp":     {"by the admin API until " + until.Local().Format("15:04:05") + "; jobs keep queueing"},
		"printer": {"maintenance", "window until " + end.Local().Format("15:04:05") + "; jobs keep queueing"},
		"zero": {"maintenance next " + next.Local().Format("Mon 15:04:05") + "–" + next.Add(2*time.Hour).Local().Format("15:04:05"),
			"override: rate 20/s ✎ · capacity 50 ✎"},
	}
	_, _, page := get(t, a.url+"/")
	for name, parts := range want {
		for _, part := range parts {
			if !strings.Contains(page, part) {
				t.Errorf("the server's page lacks %q for %s", part, name)
			}
		}
	}
	res := runPageScript(t, a)
	if len(res.Errors) > 0 {
		t.Fatalf("the script threw:\n%s", strings.Join(res.Errors, "\n"))
	}
	for _, row := range res.Polls[0].Rows {
		for name, parts := range want {
			for _, part := range parts {
				if strings.HasPrefix(row[0], name) && !strings.Contains(row[0], part) {
					t.Errorf("%s drawn %q, want it to contain %q", name, row[0], part)
				}
			}
		}
	}
}

// evilError is a job's error that would be markup if the page parsed it.
const evilError = `<img src=x onerror="alert(1)">&amp;`

// printerJobs gives printer three finished jobs, newest first: a failure
// that was dead-lettered, an expiry, and a success answered over NATS.
func printerJobs(a *testAdmin) {
	at := time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)
	a.jobs.set("printer",
		outcome.Record{JobID: "job-3", Downstream: "printer", State: outcome.Failed, Attempts: 3,
			AcceptedAt: at, EndedAt: at.Add(1500 * time.Millisecond), Error: evilError, DeadLetterSeq: 42,
			Result: &outcome.Result{StatusCode: 503, Bytes: 3}},
		outcome.Record{JobID: "job-2", Downstream: "printer", State: outcome.Expired,
			AcceptedAt: at, EndedAt: at.Add(2*time.Minute + 5*time.Second), Error: "expired before it started"},
		outcome.Record{JobID: "job-1", Downstream: "printer", State: outcome.Succeeded, Attempts: 1,
			AcceptedAt: at, EndedAt: at.Add(42 * time.Millisecond), Result: &outcome.Result{Bytes: 2}},
	)
}

// checkLatestJobs: no downstream's jobs are asked for until its "latest
// jobs" opens; then printer's are drawn in a row right below it (the error
// as text), asked again on each poll while open, and not once closed.
func checkLatestJobs(t *testing.T, res harnessResult) {
	t.Helper()
	const path = "v1/downstreams/printer/jobs"
	wantFetches := [][]string{nil, {path}, {path, path}, {path, path}}
	if !slices.EqualFunc(res.JobFetches, wantFetches, slices.Equal) {
		t.Errorf("jobs requests %q, want %q: only when opened, then once a poll while open", res.JobFetches, wantFetches)
	}
	if len(res.JobsOpened) != 1 {
		t.Fatalf("after opening printer's latest jobs, %d jobs rows: %+v", len(res.JobsOpened), res.JobsOpened)
	}
	j := res.JobsOpened[0]
	if !strings.HasPrefix(j.Above, "printer") || j.Cells != 2 || !strings.HasPrefix(j.Msg, "the last 3 jobs this instance saw end, newest first") {
		t.Errorf("jobs row %+v: want it below printer, saying it lists the last 3", j)
	}
	at := time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)
	end := func(d time.Duration) string { return at.Add(d).Local().Format("15:04:05") }
	want := [][]string{
		{"Job", "State", "Attempts", "Ended", "Duration", "HTTP", "Error"},
		{"job-3", "failed dead letter 42", "3", end(1500 * time.Millisecond), "1.5 s", "503", evilError},
		{"job-2", "expired", "0", end(2*time.Minute + 5*time.Second), "2m 5s", "–", "expired before it started"},
		{"job-1", "succeeded", "1", end(42 * time.Millisecond), "42 ms", "reply", ""},
	}
	if !slices.EqualFunc(j.Table, want, slices.Equal) {
		t.Errorf("jobs table\n%q\nwant\n%q", j.Table, want)
	}
	for _, cls := range []string{"chip", "chip drop", "chip ok", "num fail", "err"} {
		if !slices.Contains(j.Classes, cls) {
			t.Errorf("jobs row classes %q lack %q (states coloured as the page's chips, a failing HTTP status red)", j.Classes, cls)
		}
	}
	if len(res.Polls) == 3 && (len(res.Polls[1].Jobs) != 1 || len(res.Polls[2].Jobs) != 0) {
		t.Errorf("jobs rows per poll: %d, %d after the redraw and after closing, want 1, 0", len(res.Polls[1].Jobs), len(res.Polls[2].Jobs))
	}
}
