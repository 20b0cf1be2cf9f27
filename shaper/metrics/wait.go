package metrics

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	waitName = "shaper_queue_wait_seconds"
	waitHelp = "Time from acceptance to the first start of a job. Buckets: a coarse layout from 1 ms to 4 h, " +
		"plus 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.98 and 1 times the downstream's queue.max_wait."
)

// Buckets of shaper_queue_wait_seconds. Every downstream has the coarse
// layout (a factor of about 2.6 from one bucket to the next, so p99 of a
// lane whose jobs wait up to its max_wait of 30 s read 42.6 s), plus
// waitFractions of its own max_wait, where the quantiles an operator reads
// lie: how close to expiry jobs start. The layout is per downstream,
// fixed when its series are created (at start, or by the reload that adds
// the downstream); a reload that changes max_wait keeps the layout until
// the next restart. That is at most 29 buckets per downstream, whatever
// the config: the series set stays bounded. Quantiles are per downstream
// (histogram_quantile by downstream, le); sums over downstreams with other
// max_waits mix layouts and are not meaningful per bucket.
//
// Native histograms would give a fine resolution everywhere, but need a
// feature flag on Prometheus 2.x and do not feed the dashboard's
// histogram_quantile over _bucket; these classic buckets work everywhere.
var (
	waitCoarse    = prometheus.ExponentialBucketsRange(0.001, 4*3600, 18)
	waitFractions = []float64{0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.98, 1}
)

// waitBuckets is the bucket layout of a downstream with maxWait (0: none).
// A coarse bucket within 5% of a max_wait bucket is left out: it would add
// a series without adding resolution.
func waitBuckets(maxWait time.Duration) []float64 {
	if maxWait <= 0 {
		return slices.Clone(waitCoarse)
	}
	w := maxWait.Seconds()
	var out []float64
	for _, f := range waitFractions {
		out = append(out, f*w)
	}
	for _, c := range waitCoarse {
		if !slices.ContainsFunc(out[:len(waitFractions)], func(b float64) bool { return c > 0.95*b && c < 1.05*b }) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// newWaitHistograms is shaper_queue_wait_seconds: one histogram per
// downstream, each with the buckets of its max_wait (a HistogramVec has
// one layout for all); downstreams with the same max_wait share one
// layout. It is an unchecked collector (it describes nothing), since the
// downstreams come and go with the config.
func newWaitHistograms() *histograms {
	// One layout per max_wait ever configured, kept for the process's
	// life; guarded by the family's lock, which make runs under.
	layouts := map[time.Duration][]float64{}
	return &histograms{by: map[string]*histogram{}, now: time.Now,
		make: func(name string, maxWait time.Duration, now time.Time) *histogram {
			b, ok := layouts[maxWait]
			if !ok {
				b = waitBuckets(maxWait)
				layouts[maxWait] = b
			}
			desc := prometheus.NewDesc(waitName, waitHelp, nil, prometheus.Labels{"downstream": name})
			return newHistogram(desc, nil, b, now)
		}}
}
