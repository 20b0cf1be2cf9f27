package deploy_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/test"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/shaperd/shaper/config"
)

const (
	alertsPath    = "prometheus/alerts.yml"
	dashboardPath = "grafana/shaper-dashboard.json"
)

// selector is one vector selector of a PromQL expression.
type selector struct {
	name     string
	matchers []*labels.Matcher // without the __name__ one
}

// selectors parses expr with Prometheus's own parser and returns its vector
// selectors (those inside range vectors too).
func selectors(expr string) ([]selector, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var out []selector
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		s := selector{name: vs.Name}
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel {
				if s.name == "" && m.Type == labels.MatchEqual {
					s.name = m.Value
				}
				continue
			}
			s.matchers = append(s.matchers, m)
		}
		out = append(out, s)
		return nil
	})
	for _, s := range out {
		if s.name == "" {
			return nil, fmt.Errorf("%q: a selector without a metric name", expr)
		}
	}
	return out, nil
}

// alertSelectors parses the rule file with Prometheus's rule parser (what
// Prometheus and promtool run) and returns each alert's selectors.
func alertSelectors(t *testing.T) map[string][]selector {
	t.Helper()
	groups, errs := rulefmt.ParseFile(alertsPath, false, model.LegacyValidation,
		parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Errorf("rulefmt: %v", err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	out := map[string][]selector{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("%s: group %s has a recording rule %q; this file is for alerts", alertsPath, g.Name, r.Record)
				continue
			}
			for _, a := range []string{"summary", "description", "runbook"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s: alert %s: annotation %q is missing", alertsPath, r.Alert, a)
				}
			}
			if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
				t.Errorf("%s: alert %s: severity %q, want critical, warning or info", alertsPath, r.Alert, r.Labels["severity"])
			}
			if _, dup := out[r.Alert]; dup {
				t.Errorf("%s: alert %s is defined twice", alertsPath, r.Alert)
			}
			sels, err := selectors(r.Expr)
			if err != nil {
				t.Errorf("%s: alert %s: %v", alertsPath, r.Alert, err)
			}
			out[r.Alert] = sels
		}
	}
	return out
}

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	Title         string  `json:"title"`
	UID           string  `json:"uid"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	GridPos *struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// grafanaVars stands in for the dashboard's variables so that an expr is
// plain PromQL.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h",
	"${downstream}", ".*", "$downstream", ".*", "${job}", ".*", "$job", ".*",
)

var labelValuesRE = regexp.MustCompile(`^label_values\((\w+),\s*(\w+)\)$`)

// dashboardSelectors reads the dashboard and returns the selectors of every
// panel target ("panel title/refId" → selectors) and of template variables.
func dashboardSelectors(t *testing.T) map[string][]selector {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: not valid JSON: %v", dashboardPath, err)
	}
	if d.Title == "" || d.UID == "" || d.SchemaVersion < 36 || d.SchemaVersion > 41 {
		t.Errorf("%s: want a title, a uid and schemaVersion ~39, got %q %q %d", dashboardPath, d.Title, d.UID, d.SchemaVersion)
	}
	out := map[string][]selector{}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
		if v.Type != "query" {
			continue
		}
		m := labelValuesRE.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("%s: variable %s: query %q, want label_values(metric, label)", dashboardPath, v.Name, v.Definition)
			continue
		}
		// The label must exist on the metric: require a series with it set.
		out["variable "+v.Name] = []selector{{name: m[1], matchers: []*labels.Matcher{
			labels.MustNewMatcher(labels.MatchNotEqual, m[2], "")}}}
	}
	if !slices.Contains(vars, "downstream") || !slices.Contains(vars, "datasource") {
		t.Errorf("%s: want template variables datasource and downstream, got %v", dashboardPath, vars)
	}

	ids := map[int]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if prev, dup := ids[p.ID]; dup || p.ID == 0 {
				t.Errorf("%s: panel %q: id %d is zero or already used by %q", dashboardPath, p.Title, p.ID, prev)
			}
			ids[p.ID] = p.Title
			if p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 {
				t.Errorf("%s: panel %q has no gridPos", dashboardPath, p.Title)
			}
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no targets", dashboardPath, p.Title)
			}
			for _, tg := range p.Targets {
				expr := grafanaVars.Replace(tg.Expr)
				if strings.Contains(expr, "$") {
					t.Errorf("%s: panel %q/%s: unknown variable in %q", dashboardPath, p.Title, tg.RefID, tg.Expr)
					continue
				}
				sels, err := selectors(expr)
				if err != nil {
					t.Errorf("%s: panel %q/%s: %v", dashboardPath, p.Title, tg.RefID, err)
				}
				out[p.Title+"/"+tg.RefID] = sels
			}
		}
	}
	walk(d.Panels)
	return out
}

// referenced returns the metric names the selectors use.
func referenced(m map[string][]selector) map[string]bool {
	names := map[string]bool{}
	for _, sels := range m {
		for _, s := range sels {
			names[s.name] = true
		}
	}
	return names
}

// unscopedRuntime returns, for every selector of a go_* or process_* series
// that has no job matcher, where it is: every Go service exports those
// names, so a query must pick shaperd's scrape job.
func unscopedRuntime(m map[string][]selector) []string {
	var out []string
	for _, where := range keysOf(m) {
		for _, s := range m[where] {
			if runtimeFamily(s.name) && !slices.ContainsFunc(s.matchers, func(l *labels.Matcher) bool { return l.Name == "job" }) {
				out = append(out, where+": "+s.name)
			}
		}
	}
	return out
}

// TestAlertRules parses the rules without a daemon; which metrics they may
// use is TestMonitoringMatchesDaemon's job.
func TestAlertRules(t *testing.T) {
	alerts := alertSelectors(t)
	for _, u := range unscopedRuntime(alerts) {
		t.Errorf("%s: %s: select the scrape job (job=\"shaperd\"), every Go service has this series", alertsPath, u)
	}
	names := referenced(alerts)
	// The situations an operator must hear about (docs/operating.md, "Alerts").
	for _, m := range []string{
		"shaper_queue_depth", "shaper_queue_capacity", // queue near full
		"shaper_jobs_rejected_total", "shaper_jobs_dropped_total", // sustained rejections, drops
		"shaper_jobs_delivered_total",                               // dead letters, failing downstream
		"shaper_downstream_paused",                                  // paused too long
		"shaper_config_reload_failures_total",                       // reload refused
		"shaper_nats_connected",                                     // NATS down
		"shaper_jobs_started_total", "shaper_drain_rate_per_second", // drain far below configured
		"shaper_dead_letters", "shaper_dead_letters_discarded_total", // dead letters piling up
		"shaper_dead_letter_store_errors_total", // the store refuses them
		"shaper_breaker_open",                   // a breaker holding jobs for long
		"shaper_dead_letters_lost_total",        // dead letters lost
		"process_start_time_seconds",            // a restart loop
		"process_resident_memory_bytes",         // memory growing (a leak)
	} {
		if !names[m] {
			t.Errorf("%s: no alert uses %s", alertsPath, m)
		}
	}
}

// TestDashboard checks the dashboard without a daemon; a panel may read a
// metric through a recording rule.
func TestDashboard(t *testing.T) {
	panels := dashboardSelectors(t)
	for _, u := range unscopedRuntime(panels) {
		t.Errorf("%s: %s: select the scrape job (job=~\"$job\"), every Go service has this series", dashboardPath, u)
	}
	names := reads(recordingRules(t), panels)
	for _, m := range []string{
		"shaper_queue_depth", "shaper_queue_capacity", "shaper_drain_rate_per_second",
		"shaper_jobs_started_total", "shaper_jobs_accepted_total", "shaper_jobs_rejected_total",
		"shaper_jobs_dropped_total", "shaper_jobs_delivered_total", "shaper_inflight",
		"shaper_queue_wait_seconds_bucket", "shaper_delivery_duration_seconds_bucket",
		"shaper_downstream_paused", "shaper_nats_connected", "shaper_config_reload_failures_total",
		"shaper_dead_letters", "shaper_dead_letters_replayed_total", "shaper_dead_letters_discarded_total",
		"shaper_breaker_open", "shaper_breaker_trips_total",
		// The Process row: restarts, memory, heap, goroutines, descriptors.
		"process_start_time_seconds", "process_resident_memory_bytes", "go_memstats_heap_inuse_bytes",
		"go_goroutines", "process_open_fds", "process_max_fds",
	} {
		if !names[m] {
			t.Errorf("%s: no panel shows %s", dashboardPath, m)
		}
	}
}

// synthesized are series Prometheus makes itself for every scrape target.
var synthesized = map[string]bool{"up": true}

// series maps every name a query may use to the label sets the daemon
// exports under it: a histogram's family also answers to _bucket (with le),
// _sum and _count.
func series(mfs []*dto.MetricFamily) map[string][]labels.Labels {
	out := map[string][]labels.Labels{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			b := labels.NewScratchBuilder(len(m.GetLabel()))
			for _, lp := range m.GetLabel() {
				b.Add(lp.GetName(), lp.GetValue())
			}
			b.Sort()
			ls := b.Labels()
			name := mf.GetName()
			out[name] = append(out[name], ls)
			if mf.GetType() == dto.MetricType_HISTOGRAM {
				out[name+"_sum"] = append(out[name+"_sum"], ls)
				out[name+"_count"] = append(out[name+"_count"], ls)
				for _, bk := range m.GetHistogram().GetBucket() {
					le := labels.NewBuilder(ls).Set("le", model.FloatString(bk.GetUpperBound()).String()).Labels()
					out[name+"_bucket"] = append(out[name+"_bucket"], le)
				}
			}
		}
	}
	return out
}

// checkExported reports every selector that names a metric the daemon does
// not export, or whose label matchers match none of its pre-created series
// (a misspelt label or value), or that uses a label the metric does not
// have. instance and job are added by Prometheus. A recorded series (from
// recording.yml) has the labels of its level.
func checkExported(t *testing.T, file string, sels map[string][]selector, exported map[string][]labels.Labels,
	rec map[string]recorded) {
	t.Helper()
	for _, where := range keysOf(sels) {
		for _, s := range sels[where] {
			if synthesized[s.name] {
				continue
			}
			if r, ok := rec[s.name]; ok {
				for _, m := range s.matchers {
					if !slices.Contains(r.labels, m.Name) {
						t.Errorf("%s: %s: the recorded %s has no label %q (it keeps %v)", file, where, s.name, m.Name, r.labels)
					}
				}
				continue
			}
			set, ok := exported[s.name]
			if !ok {
				t.Errorf("%s: %s: metric %s is not exported by the daemon", file, where, s.name)
				continue
			}
			var ms []*labels.Matcher
			for _, m := range s.matchers {
				if m.Name == "instance" || m.Name == "job" {
					continue
				}
				ms = append(ms, m)
				// A regex such as ".*" also matches a missing label.
				if !slices.ContainsFunc(set, func(ls labels.Labels) bool { return ls.Has(m.Name) }) {
					t.Errorf("%s: %s: %s has no label %q", file, where, s.name, m.Name)
				}
			}
			if !slices.ContainsFunc(set, func(ls labels.Labels) bool {
				for _, m := range ms {
					if !m.Matches(ls.Get(m.Name)) {
						return false
					}
				}
				return true
			}) {
				t.Errorf("%s: %s: %s%v matches none of the daemon's series of that name (labels or values misspelt?)", file, where, s.name, ms)
			}
		}
	}
}

// TestMonitoringMatchesDaemon runs the real daemon on deploy/example.yaml
// (plus a copy of its printer whose admission state is in the NATS KV, so
// that every family is exported) against an in-process NATS server and
// checks that every metric the alert rules, the recording rules and the
// dashboard query is one it exports, that every family it exports is read
// by a panel or an alert, and that the container HEALTHCHECK's probe
// passes against it.
func TestMonitoringMatchesDaemon(t *testing.T) {
	alerts := alertSelectors(t)
	panels := dashboardSelectors(t)
	rec := recordingRules(t)
	recSels := map[string][]selector{}
	for name, r := range rec {
		recSels["record "+name] = r.sels
	}
	t.Parallel() // beside TestAgainstPrometheus; TestMain checks for goroutines left behind
	probe := shaperctl(t)

	opts := natsserver.DefaultTestOptions
	opts.Port = -1
	opts.JetStream = true
	opts.StoreDir = t.TempDir()
	srv := natsserver.RunServer(&opts)
	defer srv.WaitForShutdown()
	defer srv.Shutdown()

	cfg := loadConfig(t, "example.yaml")
	cfg.NATS.URL = srv.ClientURL()
	cfg.Admin.Listen = "127.0.0.1:0"
	kv := cfg.Downstreams["printer"]
	adm := *kv.Admission
	adm.Store = config.AdmissionNATS
	kv.Admission = &adm
	cfg.Downstreams["printer_kv"] = kv
	d := runConfig(t, cfg, slog.LevelInfo)

	mfs, err := d.Registry().Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	exported := series(mfs)
	checkExported(t, alertsPath, alerts, exported, nil)
	checkExported(t, recordingPath, recSels, exported, rec)
	checkExported(t, dashboardPath, panels, exported, rec)
	for _, name := range unshown(mfs, rec, panels, alerts) {
		t.Errorf("the daemon exports %s, which no panel of %s and no alert of %s reads: add a panel, "+
			"or add it to shownWithoutPanel saying why it needs none", name, dashboardPath, alertsPath)
	}

	out, err := exec.Command(probe, "health", "-admin", "http://"+d.AdminAddr()).CombinedOutput()
	if err != nil {
		t.Errorf("HEALTHCHECK probe (shaperctl health) against a running daemon: %v\n%s", err, out)
	}
}
