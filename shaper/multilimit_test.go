package shaper

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shaperd/shaper/limiter"
	"github.com/shaperd/shaper/queue"
)

// twoLimits is 2/s with a burst of 2 AND 5 per 10 s (fixed window).
var twoLimits = []limiter.Config{
	{Mode: limiter.TokenBucketMode, Rate: 2, Burst: 2},
	{Mode: limiter.FixedWindowMode, Limit: 5, Window: 10 * time.Second},
}

// TestSeveralLimits: one job of key k every 250 ms for 11 s into 2/s burst
// 2 AND 5 per 10 s. Fake time starts on a 10 s boundary. The bucket
// admits 0, 0.25, 0.5, then every other job; the window's fifth unit goes
// at 1.5 s, and from 1.75 s the window rejects until 10 s, with Retry-After
// up to the boundary. Every job the window rejects is refunded to the
// bucket, which is therefore full at 10 s and bursts again: 10, 10.25,
// 10.5 (without refunds it would hold about half a token).
func TestSeveralLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := laneCfg("a", 100, 100)
		cfg.Limits = twoLimits
		h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"a": newRecSink(nil)})
		defer h.stop()
		ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
		admitted := map[time.Duration]bool{0: true, ms(250): true, ms(500): true, ms(1000): true, ms(1500): true,
			ms(10000): true, ms(10250): true, ms(10500): true}
		start := time.Now()
		for i := range 44 {
			at := time.Duration(i) * 250 * time.Millisecond
			time.Sleep(time.Until(start.Add(at)))
			rc := h.sh.Submit(&queue.Job{Downstream: "a", Key: "k"})
			var want time.Duration // Retry-After when rejected
			switch {
			case admitted[at]:
			case at < ms(1750) || at > ms(10000): // the bucket rejects, the window is refunded
				want = ms(250)
			default: // the window rejects (the bucket too at 1.75 s: the longer wait wins)
				want = 10*time.Second - at
			}
			if rc.Accepted != admitted[at] || (!rc.Accepted && (rc.Reason != ReasonRateLimited || rc.RetryAfter != want)) {
				t.Fatalf("job at %s: %+v, want accepted=%v retry after %s", at, rc, admitted[at], want)
			}
		}
		// Refunds: the window at 0.75, 1.25 and 10.75 s; the bucket for
		// each of the 32 jobs from 2 s to 9.75 s.
		if n := testutil.ToFloat64(h.met.Refunds.WithLabelValues("a")); n != 35 {
			t.Errorf("shaper_admission_refunds_total %v, want 35", n)
		}
		if st := h.status("a"); st.Accepted != 8 || st.Rejected[ReasonRateLimited] != 36 {
			t.Errorf("accepted %d, rejected %v; want 8 and 36 rate_limited", st.Accepted, st.Rejected)
		}
	})
}

// TestSeveralLimitsShadow: shadow mode wraps the whole rule: the jobs the
// rule would refuse are accepted and counted, and none is charged.
func TestSeveralLimitsShadow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := laneCfg("a", 100, 100)
		cfg.Limits, cfg.AdmissionShadow = twoLimits, true
		h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"a": newRecSink(nil)})
		defer h.stop()
		for range 8 { // the bucket admits 2, the window would admit 5
			if rc := h.sh.Submit(&queue.Job{Downstream: "a", Key: "k"}); !rc.Accepted {
				t.Fatalf("shadow mode rejected %+v", rc)
			}
		}
		if n := testutil.ToFloat64(h.met.Shadow.WithLabelValues("a", string(ReasonRateLimited))); n != 6 {
			t.Errorf("shadow rejections %v, want 6", n)
		}
		if n := testutil.ToFloat64(h.met.Refunds.WithLabelValues("a")); n != 6 {
			t.Errorf("refunds %v, want 6 (the window, for each job the bucket refused)", n)
		}
	})
}
