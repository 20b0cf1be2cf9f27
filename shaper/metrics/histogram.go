package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// maxBuckets is the most finite buckets a histogram here has: the queue
// wait's layout has at most 29 (see waitBuckets), the try duration's 17.
const maxBuckets = 29

// histogram is one downstream's classic histogram, exposed as
// client_golang's is (the same buckets, count, sum, labels and created
// time), but kept in one object: the counts lie beside the count and the
// sum, under a lock in the same cache line, and the bounds are shared by
// every histogram of the same layout. client_golang's spreads an Observe
// over four objects (the histogram, its hot counts, their bucket array,
// its bounds); with 10 000 downstreams each observed about once a second,
// each of them was a cache miss on every observation. Safe for concurrent
// use.
type histogram struct {
	mu     sync.Mutex
	count  uint64
	sum    float64
	bounds []float64              // upper bounds, ascending; shared, never written
	counts [maxBuckets + 1]uint64 // by bucket, not cumulative; [len(bounds)] is +Inf

	desc    *prometheus.Desc
	labels  []string // the values of desc's variable labels
	created time.Time
}

// newHistogram returns a histogram of desc with labelValues (desc's
// variable labels) and bounds, created at created. bounds must be
// ascending, at most maxBuckets long (a test checks every layout), and
// not written again.
func newHistogram(desc *prometheus.Desc, labelValues []string, bounds []float64, created time.Time) *histogram {
	return &histogram{bounds: bounds, desc: desc, labels: labelValues, created: created}
}

// Observe adds v: to the first bucket whose bound is at least v (+Inf for
// NaN, as client_golang does), to the count and to the sum.
func (h *histogram) Observe(v float64) {
	i := 0
	for i < len(h.bounds) && !(v <= h.bounds[i]) {
		i++
	}
	h.mu.Lock()
	h.counts[i]++
	h.count++
	h.sum += v
	h.mu.Unlock()
}

// metric is a snapshot of the histogram as a constant metric: cumulative
// buckets that end at the count, the sum, the labels and the created time
// (what client_golang's histogram writes).
func (h *histogram) metric() prometheus.Metric {
	h.mu.Lock()
	count, sum, counts := h.count, h.sum, h.counts
	h.mu.Unlock()
	buckets := make(map[float64]uint64, len(h.bounds))
	var cum uint64
	for i, b := range h.bounds {
		cum += counts[i]
		buckets[b] = cum
	}
	return prometheus.MustNewConstHistogramWithCreatedTimestamp(h.desc, count, sum, buckets, h.created, h.labels...)
}

// histograms is a family of histograms, one per downstream, each made
// by make, which is given the downstream's name, what forLane was given
// and the time (now's). It collects what it holds; it describes desc when
// not nil (a checked collector), nothing otherwise.
type histograms struct {
	desc *prometheus.Desc
	make func(name string, maxWait time.Duration, now time.Time) *histogram
	now  func() time.Time

	mu sync.Mutex
	by map[string]*histogram
}

// Describe describes the family's desc, if it has one.
func (f *histograms) Describe(ch chan<- *prometheus.Desc) {
	if f.desc != nil {
		ch <- f.desc
	}
}

// Collect sends every downstream's histogram.
func (f *histograms) Collect(ch chan<- prometheus.Metric) {
	f.mu.Lock()
	hs := make([]*histogram, 0, len(f.by))
	for _, h := range f.by {
		hs = append(hs, h)
	}
	f.mu.Unlock()
	for _, h := range hs {
		ch <- h.metric()
	}
}

// forLane returns downstream name's histogram, making it if it has none.
func (f *histograms) forLane(name string, maxWait time.Duration) *histogram {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h, ok := f.by[name]; ok {
		return h
	}
	h := f.make(name, maxWait, f.now())
	f.by[name] = h
	return h
}

// forget deletes downstream name's histogram.
func (f *histograms) forget(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.by, name)
}

// durationBuckets are shaper_delivery_duration_seconds's: 1 ms to 65 s.
var durationBuckets = prometheus.ExponentialBuckets(0.001, 2, 17)

// newDurationHistograms is shaper_delivery_duration_seconds by
// downstream: a checked collector, one layout for all.
func newDurationHistograms() *histograms {
	desc := prometheus.NewDesc("shaper_delivery_duration_seconds", "Duration of one delivery try.", []string{"downstream"}, nil)
	return &histograms{desc: desc, by: map[string]*histogram{}, now: time.Now,
		make: func(name string, _ time.Duration, now time.Time) *histogram {
			return newHistogram(desc, []string{name}, durationBuckets, now)
		}}
}
