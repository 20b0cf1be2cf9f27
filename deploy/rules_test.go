package deploy_test

import (
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

const recordingPath = "prometheus/recording.yml"

// recorded is one recording rule: the labels its series keep (from its
// level) and the selectors of its expression.
type recorded struct {
	labels []string
	sels   []selector
}

// level:metric:operations, the level being label names joined by "_".
var recordName = regexp.MustCompile(`^([a-z]+(?:_[a-z]+)*):(shaper_[a-z0-9_]+):([a-z0-9_]+)$`)

// recordingRules parses recording.yml with Prometheus's rule parser and
// checks each rule's name against the labels its expression keeps.
func recordingRules(t *testing.T) map[string]recorded {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.ParseFile(recordingPath, false, model.LegacyValidation, p, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Errorf("rulefmt: %v", err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	out := map[string]recorded{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Record == "" {
				t.Errorf("%s: group %s has an alert %q; alerts go in %s", recordingPath, g.Name, r.Alert, alertsPath)
				continue
			}
			if _, dup := out[r.Record]; dup {
				t.Errorf("%s: %s is recorded twice", recordingPath, r.Record)
			}
			m := recordName.FindStringSubmatch(r.Record)
			if m == nil {
				t.Errorf("%s: %s: want level:metric:operations (e.g. instance_downstream:shaper_jobs_started:rate1m)", recordingPath, r.Record)
				continue
			}
			e, err := p.ParseExpr(r.Expr)
			if err != nil {
				t.Errorf("%s: %s: %v", recordingPath, r.Record, err)
				continue
			}
			// Rules are evaluated in order: a rule may read only those above.
			keeps, err := outputLabels(e, out)
			if err != nil {
				t.Errorf("%s: %s: %v", recordingPath, r.Record, err)
			}
			level := strings.Split(m[1], "_")
			if !sameSet(level, keeps) {
				t.Errorf("%s: %s: the level says %v, the expression keeps %v", recordingPath, r.Record, level, keeps)
			}
			sels, _ := selectors(r.Expr)
			out[r.Record] = recorded{labels: keeps, sels: sels}
		}
	}
	return out
}

// outputLabels returns the labels the result of e keeps: an aggregation's
// by labels, a recorded series' level, histogram_quantile's argument's
// less le, a binary operation's left side's. A bare selector of a metric
// is refused: a recording rule aggregates explicitly.
func outputLabels(e parser.Expr, rec map[string]recorded) ([]string, error) {
	switch n := e.(type) {
	case *parser.ParenExpr:
		return outputLabels(n.Expr, rec)
	case *parser.AggregateExpr:
		if n.Without {
			return nil, fmt.Errorf("aggregate with by (...), not without")
		}
		return n.Grouping, nil
	case *parser.Call:
		if n.Func.Name != "histogram_quantile" {
			return nil, fmt.Errorf("%s(...): aggregate it explicitly", n.Func.Name)
		}
		in, err := outputLabels(n.Args[1], rec)
		return slices.DeleteFunc(slices.Clone(in), func(l string) bool { return l == "le" }), err
	case *parser.BinaryExpr:
		return outputLabels(n.LHS, rec)
	case *parser.VectorSelector:
		if r, ok := rec[n.Name]; ok {
			return r.labels, nil
		}
		return nil, fmt.Errorf("%s: unknown recorded series, or a metric not aggregated", n.Name)
	}
	return nil, fmt.Errorf("%s: aggregate explicitly", e)
}

func sameSet(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}

// TestRecordingRules checks recording.yml without a daemon: names, levels,
// that the dashboard uses every rule and only rules that exist, and that
// the alerts use none (alerts.yml works loaded alone).
func TestRecordingRules(t *testing.T) {
	rec := recordingRules(t)
	dash := referenced(dashboardSelectors(t))
	used := map[string]bool{}
	for name := range dash {
		if strings.Contains(name, ":") {
			if _, ok := rec[name]; !ok {
				t.Errorf("%s: a panel uses %s, which %s does not record", dashboardPath, name, recordingPath)
			}
			markUsed(name, rec, used)
		}
	}
	for name := range rec {
		if !used[name] {
			t.Errorf("%s: %s is recorded but no panel reads it", recordingPath, name)
		}
	}
	for name := range referenced(alertSelectors(t)) {
		if strings.Contains(name, ":") {
			t.Errorf("%s: an alert uses the recorded %s; keep alerts self-contained", alertsPath, name)
		}
	}
	// The expensive expressions the dashboard repeated.
	for _, want := range []string{
		"instance_downstream:shaper_jobs_received:rate1m", "instance_downstream:shaper_jobs_accepted:rate1m",
		"instance_downstream_reason:shaper_jobs_rejected:rate1m", "instance_downstream:shaper_jobs_started:rate1m",
		"instance_downstream_outcome:shaper_jobs_delivered:rate1m", "instance_downstream:shaper_drain_rate_achieved:ratio_rate1m",
		"downstream:shaper_queue_wait_seconds:p99_rate1m",
	} {
		if _, ok := rec[want]; !ok {
			t.Errorf("%s: no rule records %s", recordingPath, want)
		}
	}
}

// markUsed marks name and the recorded series it reads, transitively.
func markUsed(name string, rec map[string]recorded, used map[string]bool) {
	r, ok := rec[name]
	if !ok || used[name] {
		return
	}
	used[name] = true
	for _, s := range r.sels {
		markUsed(s.name, rec, used)
	}
}

// shownWithoutPanel are the metric families that need no panel or alert.
var shownWithoutPanel = map[string]string{
	// client_golang's promhttp counts its own failures to gather or encode
	// /metrics on the daemon's registry. Such a scrape fails, and that is
	// what ShaperdDown (up == 0) alerts on.
	"promhttp_metric_handler_errors_total": "a failed scrape shows as up == 0",
}

// runtimeFamily tells the Go runtime's and the process's families
// (client_golang's Go and process collectors) from the daemon's own. Only
// the few the Process row and the restart and memory alerts read need a
// panel (TestDashboard and TestAlertRules name them); the other thirty-odd
// (GC pauses, memstats, threads, CPU, virtual memory, network bytes) are
// the standard set that every Go service exports and generic Go runtime
// dashboards read.
func runtimeFamily(name string) bool {
	return strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_")
}

// reads returns the series names the selectors read, directly or through
// the recording rules they use.
func reads(rec map[string]recorded, uses ...map[string][]selector) map[string]bool {
	read := map[string]bool{}
	for _, u := range uses {
		for name := range referenced(u) {
			read[name] = true
			used := map[string]bool{}
			markUsed(name, rec, used)
			for r := range used {
				for _, s := range rec[r].sels {
					read[s.name] = true
				}
			}
		}
	}
	return read
}

// unshown returns the families of mfs that no panel or alert reads, directly
// or through a recording rule a panel reads.
func unshown(mfs []*dto.MetricFamily, rec map[string]recorded, uses ...map[string][]selector) []string {
	read := reads(rec, uses...)
	var out []string
	for _, mf := range mfs {
		n := mf.GetName()
		if read[n] || read[n+"_bucket"] || read[n+"_sum"] || read[n+"_count"] || shownWithoutPanel[n] != "" || runtimeFamily(n) {
			continue
		}
		out = append(out, n)
	}
	return out
}
