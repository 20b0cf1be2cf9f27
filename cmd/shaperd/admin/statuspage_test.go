package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/outcome"
	"github.com/shaperd/shaper/shaper/policy"
)

func TestStatusPage(t *testing.T) {
	a := startTestAdmin(t, adminLoopback(), "erp", "printer")
	a.lanes.fill("printer", 12)
	if err := a.lanes.Pause("erp", time.Time{}, ""); err != nil {
		t.Fatal(err)
	}
	status, hdr, body := get(t, a.url+"/")
	if status != http.StatusOK {
		t.Fatalf("GET /: %d %s", status, body)
	}
	for k, want := range map[string]string{
		"Content-Type":           "text/html; charset=utf-8",
		"X-Content-Type-Options": "nosniff",
		"Cache-Control":          "no-store",
	} {
		if got := hdr.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'sha256-") || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
	for _, want := range []string{
		`<tr class="shedding"><td class="name"><div class="dsname">printer</div><span class="state">queue full</span>`,
		`10 / 10 (100%)`,
		`<span class="chip">queue_full 2</span>`,
		`<tr class="paused"><td class="name"><div class="dsname">erp</div><span class="state">paused</span>`,
		`0 / 10 (0%)`,
		` of 2/s</span>`,
		`<p id="summary">2 downstreams</p>`,
		`<p id="empty" hidden>`,
		`<details class="jobs"><summary>latest jobs</summary><a href="v1/downstreams/printer/jobs">as JSON</a></details></td>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("GET / lacks %s", want)
		}
	}
	if i := strings.Index(body, ">printer<"); i < strings.Index(body, ">erp<") {
		t.Errorf("rows not sorted by name")
	}
	if status, _, _ := get(t, a.url+"/nope"); status != http.StatusNotFound {
		t.Errorf("GET /nope: %d, want 404", status)
	}
}

func TestStatusPageNoDownstreams(t *testing.T) {
	a := startTestAdmin(t, adminLoopback())
	_, _, body := get(t, a.url+"/")
	for _, want := range []string{`<table id="lanes" hidden>`, `<p id="empty">No downstreams configured.`, `0 downstreams`} {
		if !strings.Contains(body, want) {
			t.Errorf("GET / lacks %s", want)
		}
	}
}

// Names are config-bounded to letters, digits, - and _, but the page does
// not rely on that: the template escapes them.
func TestStatusPageEscapesNames(t *testing.T) {
	if statusTmplErr != nil {
		t.Fatal(statusTmplErr)
	}
	until := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	evil := `<script>alert("x")</script>&'`
	var buf bytes.Buffer
	err := statusTmpl.Execute(&buf, statusRows([]downstreamRow{{LaneStatus: shaper.LaneStatus{
		Name: evil, Rate: 0.5, Capacity: 4, Depth: 1, PushbackUntil: &until,
		Rejected: map[shaper.Reason]uint64{shaper.Reason(evil): 1},
	}}}))
	if err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if strings.Contains(page, evil) || strings.Count(page, "<script>") != 1 {
		t.Errorf("name not escaped:\n%s", page)
	}
	for _, want := range []string{`&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;&#39;`, "of 30/m", "until 03:04:05", `class="state">pushback`,
		`<a href="v1/downstreams/%3cscript%3ealert%28%22x%22%29%3c/script%3e&amp;%27/jobs">`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
}

// The CSP names the page's inline script and style by hash: rendering must
// leave them byte for byte as embedded, and nothing may load from elsewhere.
func TestStatusPageCSPAndAssets(t *testing.T) {
	a := startTestAdmin(t, adminLoopback(), "printer")
	_, hdr, body := get(t, a.url+"/")
	for _, tag := range []string{"script", "style"} {
		h := inlineHashes(body, tag)
		if h == "'none'" || strings.Contains(h, " ") || !strings.Contains(hdr.Get("Content-Security-Policy"), tag+"-src "+h) {
			t.Errorf("%s hash %s not in CSP %q", tag, h, hdr.Get("Content-Security-Policy"))
		}
	}
	rest := strings.ReplaceAll(body, `"http://www.w3.org/2000/svg"`, "")
	for _, bad := range []string{"http://", "https://", " src=", "@import", "url(", `href="/`, `"//`} {
		if strings.Contains(rest, bad) {
			t.Errorf("page refers to an asset elsewhere (%q)", bad)
		}
	}
}

// The rate cell (ceiling, effective rate, the advertised quota's place)
// and the breaker line under the name, red when open. "–" while no quota.
func TestStatusPageLimitAndBreaker(t *testing.T) {
	if statusTmplErr != nil {
		t.Fatal(statusTmplErr)
	}
	until := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	var buf bytes.Buffer
	err := statusTmpl.Execute(&buf, statusRows(downstreamRows(context.Background(), time.Now(), []shaper.LaneStatus{
		{Name: "api", Rate: 100, EffectiveRate: 37.123, Capacity: 10, Breaker: policy.BreakerClosed},
		{Name: "erp", Rate: 0.5, Capacity: 10, Breaker: policy.BreakerOpen, BreakerUntil: &until},
		{Name: "legacy", Rate: 2, Capacity: 10, Breaker: policy.BreakerHalfOpen},
		{Name: "old", Rate: 2, EffectiveRate: 2, Capacity: 10}, // no breaker field: closed
	}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{
		`<span class="note"> of 100/s</span><div class="note lim">effective 37.12/s</div><div class="note lim quota">advertised –</div>`,
		`<tr class="breaker"><td class="name"><div class="dsname">erp</div><span class="state">breaker open</span><div class="note">downstream failing; jobs held until a probe at 03:04:05</div>`,
		`<span class="note"> of 30/m</span><div class="note lim">effective 0/m</div>`,
		`<div class="brk">breaker <span class="chip open">open</span> <span class="note">probe at 03:04:05</span></div>`,
		`<tr class="breaker"><td class="name"><div class="dsname">legacy</div><span class="state">probing</span>`,
		`<span class="chip half">half_open</span>`,
		`<span class="chip ok">closed</span>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if n := strings.Count(page, `<span class="chip ok">closed</span>`); n != 2 {
		t.Errorf("%d closed breakers shown, want 2 (api, old)", n)
	}
	for _, want := range []string{"function fmtQuota", "d.advertised_quota", `el("span", b === "open" ? "chip open"`, "breakerLine(d)"} {
		if !strings.Contains(page, want) {
			t.Errorf("script lacks %s", want)
		}
	}
}

func TestQuotaText(t *testing.T) {
	three := 3
	for _, tc := range []struct {
		q    *shaper.AdvertisedQuota
		want string
	}{
		{nil, "–"},
		{&shaper.AdvertisedQuota{Limit: 20, WindowSeconds: 1}, "20 per 1s"},
		{&shaper.AdvertisedQuota{Limit: 100, WindowSeconds: 60, Remaining: &three}, "100 per 1m0s (3 left)"},
	} {
		if got := quotaText(tc.q); got != tc.want {
			t.Errorf("quotaText(%+v) = %q, want %q", tc.q, got, tc.want)
		}
	}
}

// TestStatusPageFailing: a downstream whose deliveries all failed (here
// dead-lettered) is red "failing" even with an empty queue, its failures
// count failed and dead_lettered, and its retries are shown; one that has
// also succeeded is left to the script's recent-rate check.
func TestStatusPageFailing(t *testing.T) {
	var buf bytes.Buffer
	out := func(ok, failed, dead uint64) map[shaper.Outcome]uint64 {
		return map[shaper.Outcome]uint64{shaper.OutcomeSuccess: ok, shaper.OutcomeFailed: failed, shaper.OutcomeDeadLettered: dead}
	}
	err := statusTmpl.Execute(&buf, statusRows(downstreamRows(context.Background(), time.Now(), []shaper.LaneStatus{
		{Name: "erp", Rate: 2, Capacity: 10, Delivered: out(0, 2, 1594), Retries: 3235},
		{Name: "printer", Rate: 2, Capacity: 10, Delivered: out(7, 1, 0)},
	}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{
		`<tr class="failing"><td class="name"><div class="dsname">erp</div><span class="state">failing</span><div class="note">1596 deliveries failed, none succeeded</div>`,
		`<div class="note fail">ok 0 · failed 1596 (1594 dead-lettered) · retries 3235</div>`,
		`<tr class="calm"><td class="name"><div class="dsname">printer</div><span class="state">idle</span>`,
		`<div class="note fail">ok 7 · failed 1 · retries 0</div>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
}

func TestLatencyText(t *testing.T) {
	for _, tc := range []struct {
		tries   uint64
		seconds float64
		want    string
	}{
		{0, 0, "–"},
		{4, 0.168, "42 ms"},
		{2, 3, "1.5 s"},
	} {
		if got := latencyText(tc.tries, tc.seconds); got != tc.want {
			t.Errorf("latencyText(%d, %v) = %q, want %q", tc.tries, tc.seconds, got, tc.want)
		}
	}
}

// TestStatusPageLatestJobs: the route the page's "latest jobs" reads
// answers a downstream's finished jobs newest first, an empty list before
// any, 404 for an unknown downstream; the page's script asks it only for
// an open one and never parses what it answers as HTML.
func TestStatusPageLatestJobs(t *testing.T) {
	a := startTestAdmin(t, adminLoopback(), "erp", "printer")
	printerJobs(a)
	status, _, body := get(t, a.url+"/v1/downstreams/printer/jobs")
	var doc struct{ Jobs []outcome.Record }
	if err := json.Unmarshal([]byte(body), &doc); status != http.StatusOK || err != nil {
		t.Fatalf("GET printer/jobs: %d %v %s", status, err, body)
	}
	if len(doc.Jobs) != 3 || doc.Jobs[0].JobID != "job-3" || doc.Jobs[0].Error != evilError || doc.Jobs[0].Result.StatusCode != 503 {
		t.Errorf("GET printer/jobs = %s, want its 3 jobs newest first", body)
	}
	if status, _, body := get(t, a.url+"/v1/downstreams/erp/jobs"); status != http.StatusOK || strings.Join(strings.Fields(body), "") != `{"jobs":[]}` {
		t.Errorf("GET erp/jobs: %d %q, want 200 and an empty list", status, body)
	}
	if status, _, body := get(t, a.url+"/v1/downstreams/nope/jobs"); status != http.StatusNotFound || !strings.Contains(body, `no downstream named \"nope\"`) {
		t.Errorf("GET nope/jobs: %d %s, want 404 naming it", status, body)
	}
	_, _, page := get(t, a.url+"/")
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page's script uses %s", bad)
		}
	}
	for _, want := range []string{`v.details.addEventListener("toggle"`, `if (jv.details.open) { rows.push(jv.row); loadJobs(d.name, jv); }`} {
		if !strings.Contains(page, want) {
			t.Errorf("script lacks %s", want)
		}
	}
}
