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
		Conn      string
		ConnClass string
	}
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
	in, err := json.Marshal(map[string]any{"script": script, "get": map[string]string{"v1/downstreams": list, "v1/history": hist}})
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
	res := runPageScript(t, a)
	if len(res.Errors) > 0 {
		t.Fatalf("the script threw:\n%s", strings.Join(res.Errors, "\n"))
	}
	if len(res.Polls) != 2 || res.Polls[0].ConnClass != "" || !strings.HasPrefix(res.Polls[0].Conn, "updated ") {
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
