package main

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaper/limiter"
)

func resultFor(t *testing.T, results []algoResult, mode limiter.Mode) algoResult {
	t.Helper()
	for _, r := range results {
		if r.Mode == mode {
			return r
		}
	}
	t.Fatalf("no result for %s", mode)
	return algoResult{}
}

// TestSimulateBoundary is the seed article's case: 100/min, 100 requests at
// 12:00:59, 100 more at 12:01:00–12:01:01.
func TestSimulateBoundary(t *testing.T) {
	events, err := boundaryPattern(patternSpec{Limit: 100, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if first, last := events[0].At, events[len(events)-1].At; !first.Equal(simEpoch.Add(59*time.Second)) ||
		last.Before(simEpoch.Add(60*time.Second)) || !last.Before(simEpoch.Add(61*time.Second)) {
		t.Fatalf("pattern spans %v .. %v", first, last)
	}
	results, err := simulateAll(events, 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		mode                 limiter.Mode
		allowed, maxInWindow int
	}{
		{limiter.FixedWindowMode, 200, 200}, // all 200 within ~2 s
		{limiter.SlidingLogMode, 100, 100},  // the whole second batch rejected
	}
	for _, tt := range tests {
		r := resultFor(t, results, tt.mode)
		if r.Offered != 200 || r.Allowed != tt.allowed || r.MaxInWindow != tt.maxInWindow {
			t.Errorf("%s: offered %d allowed %d max-in-window %d; want 200, %d, %d",
				tt.mode, r.Offered, r.Allowed, r.MaxInWindow, tt.allowed, tt.maxInWindow)
		}
	}
	for _, r := range results {
		if r.Mode != limiter.FixedWindowMode && r.MaxInWindow > 105 {
			t.Errorf("%s admitted %d in one window; only the fixed window should double up", r.Mode, r.MaxInWindow)
		}
		if r.BytesPerKey <= 0 || r.Keys != 1 {
			t.Errorf("%s: bytes/key %d, keys %d", r.Mode, r.BytesPerKey, r.Keys)
		}
	}
}

func TestSimulateCommand(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "boundary.svg")
	code, stdout, stderr := runCmd(t, "simulate", "-pattern", "boundary", "-svg", svg)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	t.Log("\n" + stdout)
	for _, want := range []string{
		"pattern boundary: 200 requests from 1 key(s), 2024-01-01T12:00:59Z .. ",
		"token_bucket, gcra: rate = limit/window = 1.667/s, burst = limit = 100",
		"ALGORITHM        OFFERED  ALLOWED  REJECTED  MAX IN ANY 1m  STATE BYTES/KEY",
		"fixed_window     200      200      0         200",
		"sliding_log      200      100      100       100",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	checkSVG(t, string(b))
}

func TestSimulateCSV(t *testing.T) {
	path := filepath.Join(t.TempDir(), "traffic.csv")
	data := "timestamp,key\n0.5,a\n1,b\n# comment\n2024-01-01T12:00:02Z,a\n3\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCmd(t, "simulate", "-csv", path, "-limit", "2", "-window", "10s")
	if code != exitOK || !strings.Contains(stdout, "pattern csv: 4 requests from 3 key(s)") {
		t.Errorf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

func TestReadCSVPattern(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []event
		wantErr string
	}{
		{"seconds and keys", "1.5,a\n0,b\n", []event{{simEpoch, "b"}, {simEpoch.Add(1500 * time.Millisecond), "a"}}, ""},
		{"header and rfc3339", "ts\n2024-06-01T00:00:00.25Z\n",
			[]event{{time.Date(2024, 6, 1, 0, 0, 0, 250e6, time.UTC), defaultKey}}, ""},
		{"blank key", "2, \n", []event{{simEpoch.Add(2 * time.Second), defaultKey}}, ""},
		{"bad row", "1\nsoon\n", nil, `line 2: timestamp "soon" is neither RFC 3339`},
		{"empty", "ts\n", nil, "no rows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readCSVPattern(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.EqualFunc(got, tt.want, func(a, b event) bool { return a.At.Equal(b.At) && a.Key == b.Key }) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestPatterns(t *testing.T) {
	spec := patternSpec{Limit: 100, Window: time.Minute, Duration: 5 * time.Minute, Seed: 1}
	steady, err := steadyPattern(spec)
	if err != nil || len(steady) != 750 || steady[1].At.Sub(steady[0].At) != 400*time.Millisecond {
		t.Errorf("steady: %d events, err %v; want 750 at 2.5/s", len(steady), err)
	}
	a, _ := burstyPattern(spec)
	b, _ := burstyPattern(spec)
	c, _ := burstyPattern(patternSpec{Limit: 100, Window: time.Minute, Duration: 5 * time.Minute, Seed: 2})
	if !slices.Equal(a, b) || slices.Equal(a, c) || len(a)%50 != 0 || len(a) == 0 {
		t.Errorf("bursty: same seed must repeat, another seed differ, bursts of 50: %d, %d, %d events", len(a), len(b), len(c))
	}
	if !slices.IsSortedFunc(a, func(x, y event) int { return x.At.Compare(y.At) }) {
		t.Error("bursty events are not sorted")
	}
	if _, err := steadyPattern(patternSpec{Limit: 1_000_000, Window: time.Second, Duration: time.Hour}); err == nil {
		t.Error("a pattern past maxEvents must be refused")
	}
}

func TestMaxInWindow(t *testing.T) {
	at := func(secs ...float64) []time.Time {
		out := make([]time.Time, len(secs))
		for i, s := range secs {
			out[i] = simEpoch.Add(time.Duration(s * float64(time.Second)))
		}
		return out
	}
	tests := []struct {
		name  string
		times []time.Time
		w     time.Duration
		want  int
	}{
		{"empty", nil, time.Second, 0},
		{"one", at(5), time.Second, 1},
		{"half-open window", at(0, 1, 2), time.Second, 1},
		{"just inside", at(0, 0.999, 1.5), time.Second, 2},
		{"cluster later", at(0, 10, 10.1, 10.2, 10.9), time.Second, 4},
		{"same instant", at(3, 3, 3), time.Nanosecond, 3},
	}
	for _, tt := range tests {
		if got := maxInWindow(tt.times, tt.w); got != tt.want {
			t.Errorf("%s: maxInWindow = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestBinTimes(t *testing.T) {
	times := []time.Time{simEpoch, simEpoch.Add(999 * time.Millisecond), simEpoch.Add(time.Second), simEpoch.Add(time.Hour)}
	if got := binTimes(times, simEpoch, time.Second, 3); !slices.Equal(got, []int{2, 1, 1}) {
		t.Errorf("binTimes = %v, want [2 1 1] (late times in the last bin)", got)
	}
}

func TestNiceStep(t *testing.T) {
	tests := []struct{ in, want time.Duration }{
		{1, 1},
		{33 * time.Millisecond, 50 * time.Millisecond},
		{3688 * time.Millisecond, 5 * time.Second},
		{time.Second, time.Second},
		{1100 * time.Millisecond, 2 * time.Second},
	}
	for _, tt := range tests {
		if got := niceStep(tt.in); got != tt.want {
			t.Errorf("niceStep(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestWriteSVG(t *testing.T) {
	c := chart{Title: `a < b & "c"`, Span: 2 * time.Second, BinWidth: time.Second, Offered: []int{4, 0},
		Panels: []panel{{Name: "fixed_window", Caption: "allowed 3 of 4", Admitted: []int{3, 0}}, {Name: "gcra", Admitted: []int{1, 0}}}}
	var b strings.Builder
	if err := writeSVG(&b, c); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, b.String())
	for _, want := range []string{"a &lt; b &amp; &quot;c&quot;", ">fixed_window<", ">gcra<", "allowed 3 of 4", "+2s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}

// checkSVG asserts s is well-formed XML with an <svg> root.
func checkSVG(t *testing.T, s string) {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(s))
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Errorf("root element %q, want svg", root)
	}
}
