package metrics

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// bucketQuantile is Prometheus's histogram_quantile over one classic
// histogram (promql/quantile.go): linear interpolation inside the bucket
// the rank falls in; the +Inf bucket answers the highest finite bound.
func bucketQuantile(q float64, h *dto.Histogram) float64 {
	bs := h.GetBucket()
	total := float64(h.GetSampleCount())
	rank := q * total
	b := 0
	for b < len(bs) && float64(bs[b].GetCumulativeCount()) < rank {
		b++
	}
	if b == len(bs) { // in +Inf
		return bs[len(bs)-1].GetUpperBound()
	}
	start, below := 0.0, 0.0
	if b > 0 {
		start, below = bs[b-1].GetUpperBound(), float64(bs[b-1].GetCumulativeCount())
	}
	in := float64(bs[b].GetCumulativeCount()) - below
	return start + (bs[b].GetUpperBound()-start)*(rank-below)/in
}

// waitHistogram gathers downstream's shaper_queue_wait_seconds.
func waitHistogram(t *testing.T, reg *prometheus.Registry, downstream string) *dto.Histogram {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != waitName {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "downstream" && lp.GetValue() == downstream {
					return m.GetHistogram()
				}
			}
		}
	}
	t.Fatalf("no %s{downstream=%q}", waitName, downstream)
	return nil
}

// On a lane with max_wait 30 s, histogram_quantile's p99 (and p90, p50)
// of queue waits is within 3% of the true quantile, for waits spread up to
// max_wait and for a backlog whose waits crowd below it. The coarse layout
// alone read p99 42.6 s there.
func TestQueueWaitQuantilesNearMaxWait(t *testing.T) {
	const maxWait = 30 * time.Second
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		draw func() float64
	}{
		{"uniform up to max_wait", func() float64 { return rng.Float64() * 30 }},
		{"backlog around 24 s", func() float64 { return min(max(24+2*rng.NormFloat64(), 0), 30) }},
		{"backlog around 18 s", func() float64 { return min(max(18+1.5*rng.NormFloat64(), 0), 30) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := New(reg, Labels{Unknown: "_unknown"})
			lm := m.ForLane("printer", maxWait)
			coarse := m.ForLane("other", 0) // the coarse layout alone, beside it
			waits := make([]float64, 20000)
			for i := range waits {
				waits[i] = tc.draw()
				lm.Wait.Observe(waits[i])
				coarse.Wait.Observe(waits[i])
			}
			slices.Sort(waits)
			h := waitHistogram(t, reg, "printer")
			for _, q := range []float64{0.5, 0.9, 0.99} {
				truth := waits[int(math.Ceil(q*float64(len(waits))))-1]
				got := bucketQuantile(q, h)
				t.Logf("p%g: %.2f s, true %.2f s (the coarse layout alone: %.2f s)", q*100, got, truth,
					bucketQuantile(q, waitHistogram(t, reg, "other")))
				if math.Abs(got-truth)/truth > 0.03 {
					t.Errorf("p%g = %.2f s, true %.2f s: off by %.1f%%, want within 3%%", q*100, got, truth, 100*math.Abs(got-truth)/truth)
				}
			}
		})
	}
}

// Every downstream has the coarse layout plus its own max_wait's points;
// the series count stays bounded, and forget removes the histogram.
func TestQueueWaitBuckets(t *testing.T) {
	if got := waitBuckets(0); !slices.Equal(got, waitCoarse) {
		t.Errorf("no max_wait: %v, want the coarse layout", got)
	}
	for _, w := range []time.Duration{time.Millisecond, 30 * time.Second, 5 * time.Minute, 7 * 24 * time.Hour} {
		got := waitBuckets(w)
		if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Errorf("max_wait %s: %v is not strictly increasing", w, got)
		}
		for _, f := range waitFractions {
			if !slices.Contains(got, f*w.Seconds()) {
				t.Errorf("max_wait %s: no bucket at %g", w, f*w.Seconds())
			}
		}
		if len(got) > len(waitCoarse)+len(waitFractions) {
			t.Errorf("max_wait %s: %d buckets", w, len(got))
		}
	}

	reg := prometheus.NewRegistry()
	m := New(reg, Labels{Unknown: "_unknown"})
	m.ForLane("printer", 30*time.Second)
	if again := m.ForLane("printer", time.Minute); len(waitHistogram(t, reg, "printer").GetBucket()) != len(waitBuckets(30*time.Second)) {
		t.Errorf("a second lane of the same name changed the layout (%v)", again)
	}
	m.Forget("printer")
	m.Forget("printer")
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == waitName {
			t.Errorf("%s still exported after the lane was forgotten: %v", waitName, mf)
		}
	}
}
