package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The level and delayed gauges are read from each lane's CountsFunc at
// scrape, one priority series per level the lane reports; a queue that
// cannot tell has none, and Forget of the last lane stops the reading.
func TestCountsAtScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, testLabels)
	m.ForLane("a", 0)
	m.ForLane("b", 0)
	var asked time.Time
	m.Counts("a", func(now time.Time, levels []int) (int, int, bool) {
		asked = now
		copy(levels, []int{4, 0, 7})
		return 3, 2, true
	})
	m.Counts("b", func(time.Time, []int) (int, int, bool) { return 0, 0, false })
	want := `
# HELP shaper_queue_delayed_jobs Delayed jobs held in a downstream's queue whose instant has not come; they count in shaper_queue_depth too.
# TYPE shaper_queue_delayed_jobs gauge
shaper_queue_delayed_jobs{downstream="a"} 2
# HELP shaper_queue_level_depth Jobs queued in one priority level of a downstream's queue (0 = most urgent), retries included, delayed jobs not yet due excluded.
# TYPE shaper_queue_level_depth gauge
shaper_queue_level_depth{downstream="a",priority="0"} 4
shaper_queue_level_depth{downstream="a",priority="1"} 0
shaper_queue_level_depth{downstream="a",priority="2"} 7
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "shaper_queue_level_depth", "shaper_queue_delayed_jobs"); err != nil {
		t.Error(err)
	}
	if asked.IsZero() || time.Since(asked) > time.Minute {
		t.Errorf("asked at %v, want the scrape's time", asked)
	}
	if probs, err := testutil.GatherAndLint(reg); err != nil || len(probs) > 0 {
		t.Errorf("GatherAndLint: %v %v", probs, err)
	}
	m.Forget("a")
	if n, err := testutil.GatherAndCount(reg, "shaper_queue_level_depth", "shaper_queue_delayed_jobs"); err != nil || n != 0 {
		t.Errorf("after Forget: %d series (%v), want 0", n, err)
	}
}
