package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/shaperd/shaper/config"
	"github.com/shaperd/shaper/limiter"
)

// simOptions are the parsed flags of simulate.
type simOptions struct {
	Pattern string
	CSV     string
	Limit   int
	Window  time.Duration
	SVG     string
	Spec    patternSpec
}

// algoResult is one algorithm's outcome on a pattern.
type algoResult struct {
	Mode        limiter.Mode
	Offered     int
	Allowed     int
	MaxInWindow int
	BytesPerKey int
	Keys        int
	Admitted    []time.Time
}

func cmdSimulate(_ context.Context, args []string, stdout, stderr io.Writer) int {
	o, code, ok := parseSimulateFlags(args, stderr)
	if !ok {
		return code
	}
	events, err := simEvents(o)
	if err != nil {
		fmt.Fprintf(stderr, "shaperctl simulate: %v\n", err)
		return exitUsage
	}
	results, err := simulateAll(events, o.Limit, o.Window)
	if err != nil {
		fmt.Fprintf(stderr, "shaperctl simulate: %v\n", err)
		return exitUsage
	}
	if err := writeSimReport(stdout, o, events, results); err != nil {
		fmt.Fprintf(stderr, "shaperctl simulate: %v\n", err)
		return exitFailed
	}
	if o.SVG != "" {
		if err := writeSVGFile(o.SVG, buildChart(o, events, results)); err != nil {
			fmt.Fprintf(stderr, "shaperctl simulate: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(stdout, "\nwrote %s\n", o.SVG)
	}
	return exitOK
}

func parseSimulateFlags(args []string, stderr io.Writer) (simOptions, int, bool) {
	fs := newFlagSet("simulate", "[-pattern steady|bursty|boundary|csv] [-limit 100 -window 1m] [flags]", `Replays a traffic pattern through every admission algorithm of shaperd with
comparable limits and prints, per algorithm, how many requests it allowed and
rejected, the most it admitted in any sliding window of length -window, and its
state bytes per key. The window algorithms get -limit per -window; token bucket
and GCRA get rate = limit/window and burst = limit.
Patterns: steady (even, 1.5× the limit), bursty (bursts of limit/2 within
window/60, 1.5× the limit on average, -seed), boundary (limit requests in the
last window/60 of a window, limit more in the first window/60 of the next: the
fixed window's worst case), csv (-csv FILE: one row per request, a timestamp in
RFC 3339 or seconds from the start, and an optional key).

Example:
  shaperctl simulate -pattern boundary -limit 100 -window 1m -svg boundary.svg
`, stderr)
	var o simOptions
	fs.StringVar(&o.Pattern, "pattern", "steady", "traffic `pattern`: steady, bursty, boundary or csv")
	fs.StringVar(&o.CSV, "csv", "", "CSV `file` for -pattern csv (implies it)")
	fs.IntVar(&o.Limit, "limit", 100, "requests admitted per window")
	fs.DurationVar(&o.Window, "window", time.Minute, "window length")
	fs.DurationVar(&o.Spec.Duration, "duration", 5*time.Minute, "length of the steady and bursty patterns")
	fs.StringVar(&o.SVG, "svg", "", "also draw admitted vs offered over time per algorithm into this SVG `file`")
	fs.Uint64Var(&o.Spec.Seed, "seed", 1, "random seed of the bursty pattern")
	if code, ok := parseFlags(fs, args); !ok {
		return o, code, false
	}
	if o.CSV != "" && !isFlagSet(fs, "pattern") {
		o.Pattern = "csv"
	}
	o.Spec.Limit, o.Spec.Window = o.Limit, o.Window
	if msg := checkSimulate(o); msg != "" {
		return o, usageErr(stderr, "simulate", "%s", msg), false
	}
	return o, 0, true
}

// checkSimulate returns what is wrong with o, or "".
func checkSimulate(o simOptions) string {
	switch {
	case o.Limit < 1 || o.Limit > limiter.MaxLogLimit:
		return fmt.Sprintf("-limit must be 1..%d, got %d", limiter.MaxLogLimit, o.Limit)
	case o.Window <= 0:
		return fmt.Sprintf("-window must be positive, got %s", o.Window)
	case o.Spec.Duration <= 0:
		return fmt.Sprintf("-duration must be positive, got %s", o.Spec.Duration)
	case o.Pattern == "csv" && o.CSV == "":
		return "-pattern csv needs -csv FILE"
	case o.Pattern != "csv" && o.CSV != "":
		return fmt.Sprintf("-csv is only for -pattern csv, not %q", o.Pattern)
	}
	switch o.Pattern {
	case "steady", "bursty", "boundary", "csv":
		return ""
	}
	return fmt.Sprintf("unknown -pattern %q; choose steady, bursty, boundary or csv", o.Pattern)
}

// simEvents builds the pattern o asks for.
func simEvents(o simOptions) ([]event, error) {
	switch o.Pattern {
	case "steady":
		return steadyPattern(o.Spec)
	case "bursty":
		return burstyPattern(o.Spec)
	case "boundary":
		return boundaryPattern(o.Spec)
	}
	f, err := os.Open(o.CSV)
	if err != nil {
		return nil, fmt.Errorf("-csv: %w", err)
	}
	defer f.Close()
	events, err := readCSVPattern(f)
	if err != nil {
		return nil, fmt.Errorf("-csv %s: %w", o.CSV, err)
	}
	return events, nil
}

// simConfig is the limiter config of mode comparable to limit per window.
func simConfig(mode limiter.Mode, limit int, window time.Duration) limiter.Config {
	switch mode {
	case limiter.TokenBucketMode, limiter.GCRAMode:
		return limiter.Config{Mode: mode, Rate: float64(limit) / window.Seconds(), Burst: limit}
	}
	return limiter.Config{Mode: mode, Limit: limit, Window: window}
}

// simulateAll runs events through every mode of limiter.Modes.
func simulateAll(events []event, limit int, window time.Duration) ([]algoResult, error) {
	results := make([]algoResult, 0, len(limiter.Modes))
	for _, mode := range limiter.Modes {
		r, err := simulateOne(simConfig(mode, limit, window), events, window)
		if err != nil {
			return nil, fmt.Errorf("%s with limit %d per %s: %w", mode, limit, window, err)
		}
		results = append(results, r)
	}
	return results, nil
}

// simulateOne runs events (sorted by time) through one keyed limiter.
func simulateOne(cfg limiter.Config, events []event, window time.Duration) (algoResult, error) {
	k, err := limiter.NewKeyed(cfg)
	if err != nil {
		return algoResult{}, err
	}
	r := algoResult{Mode: cfg.Mode, Offered: len(events), BytesPerKey: k.StateBytesPerKey()}
	for _, e := range events {
		d, err := k.AllowAt(e.Key, e.At, 1)
		if err != nil {
			return algoResult{}, err
		}
		if d.Allowed {
			r.Admitted = append(r.Admitted, e.At)
		}
	}
	r.Allowed, r.Keys = len(r.Admitted), k.Len()
	r.MaxInWindow = maxInWindow(r.Admitted, window)
	return r, nil
}

// writeSimReport prints the pattern, the limit mapping and the table.
func writeSimReport(w io.Writer, o simOptions, events []event, results []algoResult) error {
	first, last := events[0].At, events[len(events)-1].At
	fmt.Fprintf(w, "pattern %s: %d requests from %d key(s), %s .. %s (%s)\n", o.Pattern, len(events), countKeys(events),
		first.Format(time.RFC3339Nano), last.Format(time.RFC3339Nano), config.FormatDuration(last.Sub(first)))
	fmt.Fprintf(w, "limits: fixed_window, sliding_counter, sliding_log: %d per %s; token_bucket, gcra: rate = limit/window = %s, burst = limit = %d\n\n",
		o.Limit, config.FormatDuration(o.Window), formatRate(float64(o.Limit)/o.Window.Seconds()), o.Limit)
	return renderSimTable(w, o.Window, results)
}

// renderSimTable prints one row per algorithm.
func renderSimTable(w io.Writer, window time.Duration, results []algoResult) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ALGORITHM\tOFFERED\tALLOWED\tREJECTED\tMAX IN ANY %s\tSTATE BYTES/KEY\n", config.FormatDuration(window))
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\n", r.Mode, r.Offered, r.Allowed, r.Offered-r.Allowed, r.MaxInWindow, r.BytesPerKey)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "\nstate bytes/key: limiter's StateBytesPerKey, one live key's table slot (key hash + state; the sliding\n"+
		"log adds 8 B per unit of limit), without hash-table slack.")
	return err
}

func countKeys(events []event) int {
	seen := map[string]struct{}{}
	for _, e := range events {
		seen[e.Key] = struct{}{}
	}
	return len(seen)
}
