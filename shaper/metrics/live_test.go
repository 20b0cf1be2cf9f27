package metrics

import (
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeLive is a lane's counts as a LiveFunc reads them.
type fakeLive struct {
	mu sync.Mutex
	v  Live
}

func (f *fakeLive) read() Live {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.v
}

func (f *fakeLive) set(v Live) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.v = v
}

// The started, success, in-flight and depth series are the lanes' own
// counts as of the scrape; a counter carries on across two lanes of one
// name (it gains what each counted) and starts again only after Forget
// deleted its series; the gauges are the sum over the name's lanes.
func TestLiveSeriesReadAtScrape(t *testing.T) {
	labels := testLabels
	labels.Success = "success"
	labels.Outcomes = []string{"success", "failed"}
	reg := prometheus.NewRegistry()
	m := New(reg, labels)
	scrape := func(want string) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "shaper_jobs_started_total",
			"shaper_jobs_delivered_total", "shaper_inflight", "shaper_queue_depth"); err != nil {
			t.Error(err)
		}
	}
	expo := func(started, success, failed, inflight, depth string) string {
		return `
# HELP shaper_jobs_started_total Delivery tries started; rate() is the achieved drain rate.
# TYPE shaper_jobs_started_total counter
shaper_jobs_started_total{downstream="a"} ` + started + `
# HELP shaper_jobs_delivered_total Started jobs that ended, by outcome.
# TYPE shaper_jobs_delivered_total counter
shaper_jobs_delivered_total{downstream="a",outcome="failed"} ` + failed + `
shaper_jobs_delivered_total{downstream="a",outcome="success"} ` + success + `
# HELP shaper_inflight Deliveries in progress.
# TYPE shaper_inflight gauge
shaper_inflight{downstream="a"} ` + inflight + `
# HELP shaper_queue_depth Jobs held in a downstream's queue, including retries waiting for backoff.
# TYPE shaper_queue_depth gauge
shaper_queue_depth{downstream="a"} ` + depth + `
`
	}
	first := m.ForLane("a", 0)
	scrape(expo("0", "0", "0", "0", "0")) // created, not yet read from
	if _, ok := first.Delivered["success"]; ok {
		t.Error("Lane.Delivered holds the success series a lane must not write")
	}
	var a, b fakeLive
	first.ReadFrom(a.read)
	a.set(Live{Started: 5, Succeeded: 3, Inflight: 2, Depth: 7})
	first.Delivered["failed"].Inc()
	scrape(expo("5", "3", "1", "2", "7"))
	scrape(expo("5", "3", "1", "2", "7")) // a scrape adds nothing it added before

	second := m.ForLane("a", 0) // a second lane of the name, from zero
	second.ReadFrom(b.read)
	b.set(Live{Started: 2, Succeeded: 1, Inflight: 1, Depth: 4})
	a.set(Live{Started: 6, Succeeded: 5, Inflight: 0, Depth: 6})
	scrape(expo("8", "6", "1", "1", "10"))

	m.Forget("a") // one lane of two: the series stay
	scrape(expo("8", "6", "1", "1", "10"))
	m.Forget("a")
	scrape("")

	again := m.ForLane("a", 0) // added again after its series were deleted
	var c fakeLive
	again.ReadFrom(c.read)
	c.set(Live{Started: 1})
	scrape(expo("1", "0", "0", "0", "0"))
	if probs, err := testutil.GatherAndLint(reg); err != nil || len(probs) > 0 {
		t.Errorf("GatherAndLint: %v %v", probs, err)
	}
}
