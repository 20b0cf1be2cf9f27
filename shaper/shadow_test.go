package shaper

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shaperd/shaper/limiter"
	"github.com/shaperd/shaper/queue"
)

// TestShadow: in shadow mode the policies are evaluated and counted in
// shaper_shadow_rejections_total, and nothing they would refuse is refused;
// the queue's capacity still is.
func TestShadow(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		lane, admission       bool
		rateLimited, wouldExp float64 // shadow counts
		accepted              uint64
	}{
		{"off", false, false, 0, 0, 3},             // 3 tokens; the rest rate_limited
		{"admission only", false, true, 2, 0, 5},   // 5 start within 450ms; 4 would_expire
		{"whole downstream", true, false, 5, 3, 8}, // 8 accepted (capacity 8)
		{"both", true, true, 5, 3, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := laneCfg("a", 10, 8)
				cfg.Admission = &limiter.Config{Mode: limiter.TokenBucketMode, Rate: 0.001, Burst: 3}
				cfg.MaxWait, cfg.RejectWouldExpire = 450*time.Millisecond, true
				cfg.Shadow, cfg.AdmissionShadow = tc.lane, tc.admission
				h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"a": newRecSink(nil)})
				defer h.stop()
				for range 9 { // 5 fit the 450ms wait; 3 tokens; capacity 8
					h.sh.Submit(&queue.Job{Downstream: "a", Key: "k"})
				}
				st := h.status("a")
				if st.Accepted != tc.accepted {
					t.Errorf("accepted %d, want %d (rejected %v)", st.Accepted, tc.accepted, st.Rejected)
				}
				if tc.lane && st.Rejected[ReasonQueueFull] != 1 {
					t.Errorf("rejected %v, want the 9th queue_full: capacity is never shadowed", st.Rejected)
				}
				rl := testutil.ToFloat64(h.met.Shadow.WithLabelValues("a", string(ReasonRateLimited)))
				we := testutil.ToFloat64(h.met.Shadow.WithLabelValues("a", string(ReasonWouldExpire)))
				if rl != tc.rateLimited || we != tc.wouldExp {
					t.Errorf("shadow rejections rate_limited=%v would_expire=%v, want %v %v", rl, we, tc.rateLimited, tc.wouldExp)
				}
			})
		})
	}
}
