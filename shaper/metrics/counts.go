package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// CountsFunc reports where a downstream's queued jobs wait at now: it
// fills levels (room for MaxLevels) with the jobs of each priority level,
// most urgent first, and returns how many levels it filled and how many
// jobs are delayed (their instant after now); ok is false when its queue
// cannot tell.
type CountsFunc func(now time.Time, levels []int) (n, delayed int, ok bool)

// MaxLevels is the most priority levels a CountsFunc reports.
const MaxLevels = 10

var (
	levelDesc = prometheus.NewDesc("shaper_queue_level_depth",
		"Jobs queued in one priority level of a downstream's queue (0 = most urgent), retries included, delayed jobs not yet due excluded.",
		[]string{"downstream", "priority"}, nil)
	delayedDesc = prometheus.NewDesc("shaper_queue_delayed_jobs",
		"Delayed jobs held in a downstream's queue whose instant has not come; they count in shaper_queue_depth too.",
		[]string{"downstream"}, nil)
)

// countsCollector is shaper_queue_level_depth and shaper_queue_delayed_jobs,
// read from each lane's queue when scraped (so the hot path pays nothing).
// The priority label is bounded by the downstream's queue.priorities.
type countsCollector struct {
	mu sync.Mutex
	by map[string]CountsFunc
	at func() time.Time
}

func newCountsCollector() *countsCollector {
	return &countsCollector{by: map[string]CountsFunc{}, at: time.Now}
}

func (c *countsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- levelDesc
	ch <- delayedDesc
}

func (c *countsCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	names := make([]string, 0, len(c.by))
	fs := make([]CountsFunc, 0, len(c.by))
	for name, f := range c.by {
		names, fs = append(names, name), append(fs, f)
	}
	c.mu.Unlock()
	now := c.at()
	var levels [MaxLevels]int
	for i, f := range fs { // outside c.mu: f takes its lane's lock
		n, delayed, ok := f(now, levels[:])
		if !ok {
			continue
		}
		for p := range min(n, MaxLevels) {
			ch <- prometheus.MustNewConstMetric(levelDesc, prometheus.GaugeValue, float64(levels[p]), names[i], strconv.Itoa(p))
		}
		ch <- prometheus.MustNewConstMetric(delayedDesc, prometheus.GaugeValue, float64(delayed), names[i])
	}
}

// Counts sets where downstream name's lane reads its counts from (the
// lane that registered last, when two of one name live at once); nil
// stops reading them. A nil m does nothing.
func (m *Metrics) Counts(name string, f CountsFunc) {
	if m == nil {
		return
	}
	m.counts.mu.Lock()
	defer m.counts.mu.Unlock()
	if f == nil {
		delete(m.counts.by, name)
		return
	}
	m.counts.by[name] = f
}
