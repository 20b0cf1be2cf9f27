package metrics

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// A histogram writes what client_golang's histogram with the same buckets
// and labels writes for the same observations: values on a bound, between
// bounds, below the first, above the last, +Inf and NaN.
func TestHistogramAsClientGolang(t *testing.T) {
	created := time.Unix(1000, 0)
	for _, tc := range []struct {
		name   string
		bounds []float64
		vars   []string
		consts prometheus.Labels
	}{
		{"duration layout, a variable label", durationBuckets, []string{"downstream"}, nil},
		{"wait layout, a constant label", waitBuckets(30 * time.Second), nil, prometheus.Labels{"downstream": "a"}},
		{"coarse wait layout", waitBuckets(0), nil, prometheus.Labels{"downstream": "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var values []string
			if tc.vars != nil {
				values = []string{"a"}
			}
			desc := prometheus.NewDesc("x_seconds", "X.", tc.vars, tc.consts)
			ours := newHistogram(desc, values, tc.bounds, created)
			vec := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "x_seconds", Help: "X.", Buckets: tc.bounds,
				ConstLabels: tc.consts}, tc.vars)
			theirs := vec.WithLabelValues(values...)
			for _, v := range []float64{0, 1e-9, tc.bounds[0], tc.bounds[3], (tc.bounds[3] + tc.bounds[4]) / 2,
				tc.bounds[len(tc.bounds)-1], tc.bounds[len(tc.bounds)-1] * 2, math.Inf(1), math.NaN(), -1} {
				ours.Observe(v)
				theirs.Observe(v)
			}
			var a, b dto.Metric
			if err := ours.metric().Write(&a); err != nil {
				t.Fatal(err)
			}
			if err := theirs.(prometheus.Metric).Write(&b); err != nil {
				t.Fatal(err)
			}
			if !a.GetHistogram().GetCreatedTimestamp().AsTime().Equal(created) {
				t.Errorf("created %v, want %v", a.GetHistogram().GetCreatedTimestamp().AsTime(), created)
			}
			a.Histogram.CreatedTimestamp, b.Histogram.CreatedTimestamp = nil, nil
			// NaN != NaN: compare the sums' bits.
			if math.Float64bits(a.GetHistogram().GetSampleSum()) != math.Float64bits(b.GetHistogram().GetSampleSum()) {
				t.Errorf("sum %v, client_golang's %v", a.GetHistogram().GetSampleSum(), b.GetHistogram().GetSampleSum())
			}
			a.Histogram.SampleSum, b.Histogram.SampleSum = nil, nil
			if !proto.Equal(&a, &b) {
				t.Errorf("wrote\n%v\nclient_golang's wrote\n%v", &a, &b)
			}
		})
	}
}

// Every layout fits a histogram's counts: the queue wait's at any
// max_wait, the try duration's.
func TestHistogramLayoutsFit(t *testing.T) {
	if len(durationBuckets) > maxBuckets {
		t.Errorf("%d duration buckets, more than %d", len(durationBuckets), maxBuckets)
	}
	for _, w := range []time.Duration{0, time.Millisecond, 2600 * time.Microsecond, time.Second, 30 * time.Second,
		time.Hour, 4 * time.Hour, 100 * time.Hour} {
		if n := len(waitBuckets(w)); n > maxBuckets {
			t.Errorf("max_wait %v: %d wait buckets, more than %d", w, n, maxBuckets)
		}
	}
	if n := len(waitCoarse) + len(waitFractions); n > maxBuckets {
		t.Errorf("wait layouts may have %d buckets, more than %d", n, maxBuckets)
	}
}

// Both histogram families gather and lint clean, with the names, help and
// label the contract gives them.
func TestHistogramFamilies(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, testLabels)
	lm := m.ForLane("a", 30*time.Second)
	lm.Wait.Observe(0.5)
	lm.Duration.Observe(0.002)
	if probs, err := testutil.GatherAndLint(reg); err != nil || len(probs) > 0 {
		t.Errorf("GatherAndLint: %v %v", probs, err)
	}
	want := `
# HELP shaper_delivery_duration_seconds Duration of one delivery try.
# TYPE shaper_delivery_duration_seconds histogram
shaper_delivery_duration_seconds_bucket{downstream="a",le="0.001"} 0
shaper_delivery_duration_seconds_bucket{downstream="a",le="0.002"} 1
shaper_delivery_duration_seconds_bucket{downstream="a",le="0.004"} 1
shaper_delivery_duration_seconds_bucket{downstream="a",le="0.008"} 1
shaper_delivery_duration_seconds_bucket{downstream="a",le="0.016"} 1
shaper_delivery_duration_seconds_bucket{downstream="a",le="0.032"} 1
shaper_delivery_duration_seconds_bucket{downstream="a",le="0.064"} 1
shaper_delivery_duration_seconds_bucket{downstream="a",le="0.128"} 1
shaper_delivery_duration_seconds_bucket{downstream="a",le="0.256"} 1
shaper_delivery_duration_seconds_bucket{downstream="a",le="0.512"} 1
shaper_delivery_duration_seconds_bucket{downstream="a",le="1.024"} 1
shaper_delivery_duration_seconds_bucket{downstream="a",le="2.048"} 1
shaper_delivery_duration_seconds_bucket{downstream="a",le="4.096"} 1
shaper_delivery_duration_seconds_bucket{downstream="a",le="8.192"} 1
shaper_delivery_duration_seconds_bucket{downstream="a",le="16.384"} 1
shaper_delivery_duration_seconds_bucket{downstream="a",le="32.768"} 1
shaper_delivery_duration_seconds_bucket{downstream="a",le="65.536"} 1
shaper_delivery_duration_seconds_bucket{downstream="a",le="+Inf"} 1
shaper_delivery_duration_seconds_sum{downstream="a"} 0.002
shaper_delivery_duration_seconds_count{downstream="a"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "shaper_delivery_duration_seconds"); err != nil {
		t.Error(err)
	}
	if h := waitHistogram(t, reg, "a"); h.GetSampleCount() != 1 || h.GetSampleSum() != 0.5 || len(h.GetBucket()) != len(waitBuckets(30*time.Second)) {
		t.Errorf("wait histogram: %v", h)
	}
	m.ForLane("b", 30*time.Second)
	if &m.wait.by["a"].bounds[0] != &m.wait.by["b"].bounds[0] {
		t.Error("two downstreams with the same max_wait do not share their layout")
	}
	m.Forget("a")
	if n := testutil.CollectAndCount(m.dur); n != 1 {
		t.Errorf("after Forget(a): %d duration series, want 1", n)
	}
}
