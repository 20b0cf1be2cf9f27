package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/common/model"

	"github.com/shaperd/shaper/cmd/shaperd/daemon"
)

// The alerts that must fire for the failing downstream of
// TestAgainstPrometheus (answers 500, so every job is dead-lettered after
// its attempts; offered 3x its rate, so its queue is full and refuses).
var failingAlerts = []string{
	"ShaperJobsDeadLettered", "ShaperDownstreamFailing", "ShaperDeadLettersPilingUp",
	"ShaperQueueNearlyFull", "ShaperJobsRejectedQueueFull",
}

// ruleScale shortens alerts.yml for the test: every for: and every range
// window is divided by it (5m → 10s, 10m → 20s, 15m → 30s), so that alerts
// built for minutes of evidence fire within a minute. The expressions,
// labels and thresholds are the file's own; only durations change.
const ruleScale = 30

var (
	forRE   = regexp.MustCompile(`(?m)^(\s+for:\s*)(\S+)\s*$`)
	rangeRE = regexp.MustCompile(`\[(\d+[smhd])\]`)
)

// shortenedAlerts writes alerts.yml into dir with its durations divided by
// ruleScale (ranges at least 5s: five samples at the 1s scrape interval).
func shortenedAlerts(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	scale := func(s string, least time.Duration) string {
		d, err := model.ParseDuration(s)
		if err != nil {
			t.Fatalf("%s: duration %q: %v", alertsPath, s, err)
		}
		return model.Duration(max(time.Duration(d)/ruleScale, least).Round(time.Second)).String()
	}
	out := forRE.ReplaceAllStringFunc(string(b), func(m string) string {
		sm := forRE.FindStringSubmatch(m)
		return sm[1] + scale(sm[2], time.Second)
	})
	out = rangeRE.ReplaceAllStringFunc(out, func(m string) string {
		return "[" + scale(m[1:len(m)-1], 5*time.Second) + "]"
	})
	path := filepath.Join(dir, "alerts.yml")
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// promRules are the rule files Prometheus loads: the shortened alerts and
// every other file of prometheus/ as it is.
func promRules(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob("prometheus/*.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("prometheus/*.yml: %v %v", files, err)
	}
	out := []string{shortenedAlerts(t, dir)}
	for _, f := range files {
		if f != alertsPath {
			abs, _ := filepath.Abs(f)
			out = append(out, abs)
		}
	}
	return out
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return port(t, l.Addr().String())
}

// startPrometheus runs the prometheus binary on a loopback port, scraping
// target every second with the rules loaded, and returns its base URL. It
// is stopped when the test ends; its log is printed if the test failed.
func startPrometheus(t *testing.T, bin, target string, rules []string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, scrape_timeout: 900ms, evaluation_interval: 1s}
rule_files: [%s]
scrape_configs:
  - job_name: shaperd
    static_configs: [{targets: [%q]}]
`, strings.Join(quoteAll(rules), ", "), target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + freePort(t)
	var logBuf syncBuffer
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr,
		"--log.level=warn")
	cmd.Stdout, cmd.Stderr = &logBuf, &logBuf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logBuf.String())
		}
	})
	base := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		if code, err := httpStatus(base + "/-/ready"); err == nil && code == http.StatusOK {
			return base
		}
		select {
		case <-exited:
			t.Fatalf("prometheus exited at start:\n%s", logBuf.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready within 30s:\n%s", logBuf.String())
		}
	}
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

func httpStatus(u string) (int, error) {
	resp, err := http.Get(u)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// syncBuffer is a bytes.Buffer safe for the process's two output pipes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// promAPI answers GET base+path with query, decoding data into out.
func promAPI(base, path string, query url.Values, out any) error {
	resp, err := http.Get(base + path + "?" + query.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return fmt.Errorf("%s: %s: %v", path, resp.Status, err)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s %v: %s", path, query, r.Error)
	}
	return json.Unmarshal(r.Data, out)
}

type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"` // pending or firing
}

func activeAlerts(base string) ([]promAlert, error) {
	var data struct {
		Alerts []promAlert `json:"alerts"`
	}
	err := promAPI(base, "/api/v1/alerts", nil, &data)
	return data.Alerts, err
}

// instantQuery evaluates expr now and returns its samples' values.
func instantQuery(base, expr string) ([]float64, error) {
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Value [2]any `json:"value"`
		} `json:"result"`
	}
	if err := promAPI(base, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("result type %s, want vector", data.ResultType)
	}
	var out []float64
	for _, r := range data.Result {
		s, _ := r.Value[1].(string)
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("sample %v: %v", r.Value, err)
		}
		out = append(out, f)
	}
	return out, nil
}

// promVars stands in for the dashboard's variables as Grafana would fill
// them for "All" downstreams over the test's minute, at a 1s scrape, with
// the test's scrape job.
var promVars = strings.NewReplacer(
	"$__rate_interval", "15s", "$__interval", "5s", "$__range", "5m",
	"${downstream}", ".*", "$downstream", ".*", "${job}", "shaperd", "$job", "shaperd",
)

// variableWants are the values each dashboard variable must offer against
// the test's Prometheus, by the label it lists.
var variableWants = map[string][]string{
	"downstream": {"healthy", "failing"},
	"job":        {"shaperd"},
}

// panelTarget is one query of a dashboard panel.
type panelTarget struct{ where, expr string }

func dashboardTargets(t *testing.T) ([]panelTarget, dashboard) {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var out []panelTarget
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, tg := range p.Targets {
				out = append(out, panelTarget{p.Title + "/" + tg.RefID, promVars.Replace(tg.Expr)})
			}
		}
	}
	walk(d.Panels)
	return out, d
}

// testDownstreams are the two HTTP downstreams: healthy answers 200,
// failing 500 to every try.
func testDownstreams(t *testing.T) (healthy, failing *httptest.Server) {
	t.Helper()
	healthy = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	failing = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "backend broken", http.StatusInternalServerError)
	}))
	t.Cleanup(healthy.Close)
	t.Cleanup(failing.Close)
	return healthy, failing
}

// promConfig is the daemon's config: healthy drains 20/s, is offered 14/s
// and keeps its admission state in the NATS KV (so the KV store's series
// exist); failing drains 10/s, is offered 33/s, gives up after 2 tries
// (no breaker holds its jobs). Failing's queue holds 100 so that its
// depth stays clearly over ShaperQueueNearlyFull's 90 %: with 20 it sat
// at 19 (one job in flight) and fell to 18, not over 90 %, for the few
// milliseconds after each start until the next job arrived; a scrape
// that landed there reset the alert's for:, and under -race on a loaded
// machine it failed to fire within 4 minutes.
func promConfig(t *testing.T, natsURL, healthy, failing string) string {
	t.Helper()
	yaml := fmt.Sprintf(`
nats: { url: %q }
admin: { listen: "127.0.0.1:0" }
shutdown_grace: 2s
downstreams:
  healthy:
    rate: 20/s
    queue: { capacity: 200, backend: memory, max_wait: 30s }
    admission: { mode: token_bucket, rate: 1000/s, burst: 1000, store: nats }
    sink: { http: { url: %q, timeout: 2s } }
  failing:
    rate: 10/s
    queue: { capacity: 100, backend: memory, max_wait: 60s }
    sink: { http: { url: %q, timeout: 2s } }
    retry: { max_attempts: 2, initial_backoff: 100ms, max_backoff: 100ms }
    breaker: { failures: 0 }  # every job dead-lettered after its tries, none held
`, natsURL, healthy, failing)
	path := filepath.Join(t.TempDir(), "shaper.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runPromDaemon starts the daemon in-process on the config at path and
// stops it when the test ends.
func runPromDaemon(t *testing.T, path string) *daemon.Daemon {
	t.Helper()
	return runConfig(t, loadConfig(t, path), slog.LevelError)
}

// drive publishes jobs every 10 ms tick (healthy on every 7th, failing on
// every 3rd) until the test ends.
func drive(t *testing.T, natsURL string) {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait(); nc.Close() })
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for k := 0; ; k++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if k%7 == 0 {
				_ = nc.Publish("shaper.jobs.healthy", []byte(`{"n":`+strconv.Itoa(k)+`}`))
			}
			if k%3 == 0 {
				_ = nc.Publish("shaper.jobs.failing", []byte(`{"n":`+strconv.Itoa(k)+`}`))
			}
		}
	})
}

// TestAgainstPrometheus runs the real daemon with a healthy and a failing
// downstream under load, scraped every second by a real Prometheus (the
// prometheus binary on PATH; .ci/run installs Debian's package) that loads
// prometheus/ (alerts.yml with its durations shortened, see ruleScale).
// Through Prometheus's HTTP API it checks that the failing downstream's
// alerts fire, that nothing else is pending or firing (the healthy
// downstream stays quiet), and that every panel query of the dashboard and
// its variable return data. About a minute; loopback only.
func TestAgainstPrometheus(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("SKIPPED: no prometheus binary on PATH, so the alerts and the dashboard were NOT checked against a real " +
			"Prometheus. Install Debian's prometheus package (apt-get install prometheus; .ci/run does when apt is reachable).")
	}
	if testing.Short() {
		t.Skip("about a minute against a real Prometheus; not with -short")
	}
	opts := natsserver.DefaultTestOptions
	opts.Port = -1
	opts.JetStream = true
	opts.StoreDir = t.TempDir()
	srv := natsserver.RunServer(&opts)
	t.Cleanup(srv.WaitForShutdown)
	t.Cleanup(srv.Shutdown)
	healthy, failing := testDownstreams(t)
	d := runPromDaemon(t, promConfig(t, srv.ClientURL(), healthy.URL, failing.URL))

	drive(t, srv.ClientURL())
	// Prometheus starts on steady traffic: every rate window it sees is
	// one of a loaded daemon, none of its first second.
	time.Sleep(3 * time.Second)
	base := startPrometheus(t, bin, d.AdminAddr(), promRules(t, t.TempDir()))
	start := time.Now()
	waitForAlerts(t, base, 4*time.Minute) // about 40 s on an idle 2-core machine; generous for a loaded one
	t.Logf("every alert of the failing downstream fired %s after Prometheus started", time.Since(start).Round(time.Second))
	checkPanels(t, base)
}

// waitForAlerts polls the alerts until every one of failingAlerts fires for
// downstream failing, failing the test for any alert pending or firing on
// anything else meanwhile.
func waitForAlerts(t *testing.T, base string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	seen := map[string]bool{} // alerts reported or logged already, by name, downstream and state
	for {
		alerts, err := activeAlerts(base)
		if err != nil {
			t.Fatalf("alerts API: %v", err)
		}
		firing := map[string]bool{}
		for _, a := range alerts {
			name, ds := a.Labels["alertname"], a.Labels["downstream"]
			key := name + "/" + ds + "/" + a.State
			switch {
			case ds == "failing" && slices.Contains(failingAlerts, name):
				firing[name] = firing[name] || a.State == "firing"
			case seen[key]:
			case ds == "failing": // more may be true of a failing downstream
				t.Logf("also %s for the failing downstream: %s", a.State, name)
			default:
				t.Errorf("alert %s is %s for %v: only the failing downstream's alerts may be active", name, a.State, a.Labels)
			}
			seen[key] = true
		}
		missing := slices.DeleteFunc(slices.Clone(failingAlerts), func(n string) bool { return firing[n] })
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			logRecent(t, base, `shaper_queue_depth{downstream="failing"}`,
				`sum(rate(shaper_jobs_started_total{downstream="failing"}[5s]))`,
				`sum(rate(shaper_jobs_received_total{downstream="failing"}[5s]))`)
			t.Fatalf("within %s these alerts did not fire for the failing downstream: %v (active: %v)", within, missing, alerts)
		}
		time.Sleep(time.Second)
	}
}

// logRecent logs each expression's values over the last 30 s (one per
// second), so that an alert that did not fire shows what it saw.
func logRecent(t *testing.T, base string, exprs ...string) {
	t.Helper()
	for _, expr := range exprs {
		var data struct {
			Result []struct {
				Values [][2]any `json:"values"`
			} `json:"result"`
		}
		now := time.Now()
		q := url.Values{"query": {expr}, "step": {"1"},
			"start": {strconv.FormatInt(now.Add(-30*time.Second).Unix(), 10)}, "end": {strconv.FormatInt(now.Unix(), 10)}}
		if err := promAPI(base, "/api/v1/query_range", q, &data); err != nil {
			t.Logf("%s: %v", expr, err)
			continue
		}
		for _, r := range data.Result {
			vals := make([]string, len(r.Values))
			for i, v := range r.Values {
				vals[i], _ = v[1].(string)
			}
			t.Logf("%s over the last 30s: %s", expr, strings.Join(vals, " "))
		}
	}
}

// checkPanels evaluates every panel query and the downstream variable:
// each must answer at least one sample that is a number.
func checkPanels(t *testing.T, base string) {
	t.Helper()
	targets, d := dashboardTargets(t)
	for _, tg := range targets {
		vals, err := instantQuery(base, tg.expr)
		if err != nil {
			t.Errorf("%s: %s: %v", dashboardPath, tg.where, err)
			continue
		}
		if !slices.ContainsFunc(vals, func(v float64) bool { return !math.IsNaN(v) }) {
			t.Errorf("%s: panel %s: %s returned no data (%v)", dashboardPath, tg.where, tg.expr, vals)
		}
	}
	for _, v := range d.Templating.List {
		m := labelValuesRE.FindStringSubmatch(v.Definition)
		if m == nil {
			continue
		}
		var values []string
		if err := promAPI(base, "/api/v1/label/"+m[2]+"/values", url.Values{"match[]": {m[1]}}, &values); err != nil {
			t.Errorf("variable %s: %v", v.Name, err)
		}
		want, ok := variableWants[m[2]]
		if !ok {
			t.Errorf("variable %s (%s): no values known to want for label %s", v.Name, v.Definition, m[2])
		}
		for _, w := range want {
			if !slices.Contains(values, w) {
				t.Errorf("variable %s (%s): values %v, want %v", v.Name, v.Definition, values, want)
				break
			}
		}
	}
}
