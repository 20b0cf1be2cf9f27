package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shaperd/shaper/cmd/shaperd/admin/api"
)

// statusOptions are the parsed flags of status.
type statusOptions struct {
	adminFlags
	Watch time.Duration
	JSON  bool
}

// knownColumns are the /v1/downstreams keys shown in fixed columns; every
// other key is a counter.
var knownColumns = []string{"name", "rate", "effective_rate", "depth", "capacity", "levels", "delayed", "inflight", "key_concurrency", "paused", "paused_until", "batch"}

// counterOrder puts the job lifecycle counters first, in lifecycle order;
// unknown counters follow alphabetically.
var counterOrder = []string{"received", "accepted", "rejected", "dropped", "started", "delivered"}

func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("status", "[-admin URL] [-user NAME -password PW] [-ca FILE] [-watch 2s] [-json]", `Shows every downstream of a running shaperd, from its admin API
(GET /v1/downstreams): configured and effective rate, queue depth/capacity
(with priority levels: the jobs per level, most urgent first; and the delayed
jobs not yet due), jobs in flight, whether it is paused, and its job counters.

Example:
  shaperctl status -admin http://127.0.0.1:9090 -watch 2s
`+adminAuthHelp, stderr)
	var o statusOptions
	o.register(fs)
	fs.DurationVar(&o.Watch, "watch", 0, "refresh every `interval` until interrupted (0 = once)")
	fs.BoolVar(&o.JSON, "json", false, "print the daemon's JSON as is")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if o.Watch < 0 {
		return usageErr(stderr, "status", "-watch must be positive, got %s", o.Watch)
	}
	client, err := o.client(5 * time.Second)
	if err != nil {
		return usageErr(stderr, "status", "%v", err)
	}
	if o.Watch == 0 {
		return statusOnce(ctx, client, o, stdout, stderr)
	}
	return watchStatus(ctx, client, o, isTerminal(stdout), stdout, stderr)
}

// watchStatus prints the table every o.Watch until ctx ends; errors are
// printed and the watch goes on, as a restarting daemon comes back.
func watchStatus(ctx context.Context, client *adminClient, o statusOptions, clear bool, stdout, stderr io.Writer) int {
	tick := time.NewTicker(o.Watch)
	defer tick.Stop()
	for {
		if clear {
			fmt.Fprint(stdout, "\033[H\033[2J")
		}
		fmt.Fprintf(stdout, "%s  every %s, Ctrl-C to stop\n", time.Now().Format(time.TimeOnly), o.Watch)
		statusOnce(ctx, client, o, stdout, stderr)
		select {
		case <-ctx.Done():
			return exitOK
		case <-tick.C:
		}
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// statusOnce fetches and prints the table once.
func statusOnce(ctx context.Context, client *adminClient, o statusOptions, stdout, stderr io.Writer) int {
	body, err := client.do(ctx, http.MethodGet, "/v1/downstreams", nil)
	if err != nil {
		fmt.Fprintf(stderr, "shaperctl status: %v\n", err)
		return exitFailed
	}
	if o.JSON {
		var buf bytes.Buffer
		if json.Indent(&buf, body, "", "  ") == nil {
			body = append(buf.Bytes(), '\n')
		}
		_, _ = stdout.Write(body)
		return exitOK
	}
	// Rows as maps: every counter is shown, one this shaperctl does not
	// know too.
	var doc api.Downstreams[map[string]any]
	if err := json.Unmarshal(body, &doc); err != nil {
		fmt.Fprintf(stderr, "shaperctl status: %s/v1/downstreams did not answer the expected JSON: %v\n", client.base, err)
		return exitFailed
	}
	if err := renderStatus(stdout, doc.Downstreams); err != nil {
		fmt.Fprintf(stderr, "shaperctl status: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// renderStatus prints the downstream table.
func renderStatus(w io.Writer, downstreams []map[string]any) error {
	if len(downstreams) == 0 {
		_, err := fmt.Fprintln(w, "no downstreams configured; add one under downstreams: in the config and send SIGHUP")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRATE\tQUEUE\tINFLIGHT\tPAUSED\tCOUNTERS")
	for _, d := range downstreams {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", valueText(d["name"]), rateColumn(d),
			queueColumn(d), inflightColumn(d), pausedColumn(d), countersColumn(d))
	}
	return tw.Flush()
}

// rateColumn is "2/s", or "2/s (effective 1.5/s)" when they differ;
// with a batch, the rate counts calls: "2/s calls of ≤100 (mean 87.5)".
func rateColumn(d map[string]any) string {
	rate := rateText(d["rate"])
	if eff, ok := d["effective_rate"]; ok && eff != nil {
		if e := rateText(eff); e != rate {
			rate += " (effective " + e + ")"
		}
	}
	if b, ok := d["batch"].(map[string]any); ok {
		rate += " calls of ≤" + valueText(b["max_jobs"])
		calls, _ := b["calls"].(float64)
		if jobs, _ := b["jobs"].(float64); calls > 0 {
			rate += " (mean " + strconv.FormatFloat(jobs/calls, 'f', 1, 64) + ")"
		}
	}
	return rate
}

// rateText prints a rate given as a number (per second) or as text (2/s).
func rateText(v any) string {
	if f, ok := v.(float64); ok {
		return formatRate(f)
	}
	return valueText(v)
}

// queueColumn is "[###-------] 3/10": bar first, so bars line up; then,
// with priority levels, the jobs per level (most urgent first), and the
// delayed jobs not yet due: "[###-------] 3/10 by level 1/0/1, 1 delayed".
func queueColumn(d map[string]any) string {
	depth, okD := d["depth"].(float64)
	capacity, okC := d["capacity"].(float64)
	s := valueText(d["depth"]) + "/" + valueText(d["capacity"])
	if okD && okC && capacity > 0 {
		s = bar(depth/capacity, 10) + " " + s
	}
	var parts []string
	if levels, ok := d["levels"].([]any); ok && len(levels) > 1 {
		by := make([]string, len(levels))
		for i, n := range levels {
			by[i] = valueText(n)
		}
		parts = append(parts, "by level "+strings.Join(by, "/"))
	}
	if n, ok := d["delayed"].(float64); ok && n > 0 {
		parts = append(parts, valueText(n)+" delayed")
	}
	if len(parts) > 0 {
		s += " " + strings.Join(parts, ", ")
	}
	return s
}

// inflightColumn is "3", or "3 (≤1/key)" under queue.key_concurrency.
func inflightColumn(d map[string]any) string {
	s := valueText(d["inflight"])
	if n, ok := d["key_concurrency"].(float64); ok && n > 0 {
		s += " (≤" + valueText(n) + "/key)"
	}
	return s
}

// bar draws a fill fraction as [###-------], width cells wide.
func bar(frac float64, width int) string {
	n := int(math.Round(min(max(frac, 0), 1) * float64(width)))
	if n == 0 && frac > 0 {
		n = 1 // a non-empty queue never looks empty
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat("-", width-n) + "]"
}

// pausedColumn is "no", "yes" or "yes, until <paused_until>".
func pausedColumn(d map[string]any) string {
	p, _ := d["paused"].(bool)
	until, _ := d["paused_until"].(string)
	if strings.HasPrefix(until, "0001-01-01") { // a zero time.Time: not paused
		until = ""
	}
	switch {
	case until != "":
		return "until " + until
	case p:
		return "yes"
	case d["paused"] == nil:
		return "-"
	}
	return "no"
}

// countersColumn prints every key that has no fixed column, compactly:
// received=15 rejected{queue_full=5}.
func countersColumn(d map[string]any) string {
	var parts []string
	for _, k := range counterKeys(d) {
		switch v := d[k].(type) {
		case map[string]any:
			if inner := mapText(v); inner != "" {
				parts = append(parts, k+"{"+inner+"}")
			} else {
				parts = append(parts, k+"=0")
			}
		default:
			parts = append(parts, k+"="+valueText(v))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// counterKeys lists d's counter keys: lifecycle counters first, the rest
// sorted.
func counterKeys(d map[string]any) []string {
	keys := slices.Sorted(maps.Keys(d))
	keys = slices.DeleteFunc(keys, func(k string) bool { return slices.Contains(knownColumns, k) })
	rank := func(k string) int {
		if i := slices.Index(counterOrder, k); i >= 0 {
			return i
		}
		return len(counterOrder)
	}
	slices.SortStableFunc(keys, func(a, b string) int { return rank(a) - rank(b) })
	return keys
}

// mapText prints a nested map as a=1,b=2 with sorted keys, leaving out
// zeros: a daemon pre-creates every reason, and most stay 0.
func mapText(m map[string]any) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch v := m[k].(type) {
		case map[string]any:
			if inner := mapText(v); inner != "" {
				parts = append(parts, k+"{"+inner+"}")
			}
		case float64:
			if v != 0 {
				parts = append(parts, k+"="+valueText(v))
			}
		default:
			parts = append(parts, k+"="+valueText(v))
		}
	}
	return strings.Join(parts, ",")
}

// valueText prints a decoded JSON value: whole numbers without decimals.
func valueText(v any) string {
	switch v := v.(type) {
	case nil:
		return "-"
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1e15 {
			return strconv.FormatInt(int64(v), 10)
		}
		return formatNum(v)
	case string:
		return v
	}
	b, _ := json.Marshal(v)
	return string(b)
}
