package shaper

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/shaperd/shaper/limiter"
	"github.com/shaperd/shaper/queue"
)

// TestCostTakesSlotsAndDrainTime: a job of cost N holds N slots of capacity
// and N intervals of drain time; a cost above MaxCost is a bad request.
func TestCostTakesSlotsAndDrainTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecSink(nil)
		cfg := laneCfg("gql", 10, 10) // 100 ms per slot
		cfg.MaxCost = 5
		h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"gql": sink})
		defer h.stop()
		submit := func(cost int) Receipt {
			return h.sh.Submit(&queue.Job{Downstream: "gql", Cost: cost, Payload: []byte("x")})
		}
		if rc := submit(6); rc.Accepted || rc.Reason != ReasonBadRequest {
			t.Fatalf("cost 6 > max 5: %+v, want bad_request", rc)
		}
		for i, c := range []int{5, 1, 3} { // 9 of 10 slots
			if rc := submit(c); !rc.Accepted {
				t.Fatalf("job %d (cost %d): %+v", i, c, rc)
			}
		}
		rc := submit(2) // 9 + 2 > 10
		if rc.Accepted || rc.Reason != ReasonQueueFull {
			t.Fatalf("cost 2 into 9/10: %+v, want queue_full", rc)
		}
		// One slot frees per 100 ms of drain; this job needs one more slot
		// than is free: at most two intervals.
		if rc.RetryAfter <= 0 || rc.RetryAfter > 200*time.Millisecond {
			t.Errorf("RetryAfter %v, want (0, 200ms]", rc.RetryAfter)
		}
		if rc := submit(1); !rc.Accepted || rc.ETA != 900*time.Millisecond {
			t.Fatalf("cost 1 into 9/10: %+v, want accepted with ETA 900ms", rc)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		// Starts at 0 (cost 5), 0.5 (cost 1), 0.6 (cost 3), 0.9 (cost 1).
		wantStarts(t, sink.starts(), 0, 0.5, 0.6, 0.9)
	})
}

// TestCostChargesAdmission: cost N takes N tokens from the admission rule.
func TestCostChargesAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := laneCfg("gql", 100, 100)
		cfg.MaxCost = 10
		cfg.Admission = &limiter.Config{Mode: limiter.TokenBucketMode, Rate: 1, Burst: 10}
		h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"gql": newRecSink(nil)})
		defer h.stop()
		if rc := h.sh.Submit(&queue.Job{Downstream: "gql", Key: "k", Cost: 8}); !rc.Accepted {
			t.Fatalf("cost 8 of burst 10: %+v", rc)
		}
		rc := h.sh.Submit(&queue.Job{Downstream: "gql", Key: "k", Cost: 3})
		if rc.Accepted || rc.Reason != ReasonRateLimited || rc.RetryAfter != time.Second {
			t.Fatalf("cost 3 with 2 tokens left: %+v, want rate_limited after 1s", rc)
		}
		if rc := h.sh.Submit(&queue.Job{Downstream: "gql", Key: "k", Cost: 2}); !rc.Accepted {
			t.Fatalf("cost 2 with 2 tokens left: %+v", rc)
		}
	})
}

// TestQueueFullRetryAfterSameBeforeAndAfterStart: a job refused queue_full
// is told the same wait whether or not the scheduler has already started
// the head job at that instant — the bucket's level is the same either way.
func TestQueueFullRetryAfterSameBeforeAndAfterStart(t *testing.T) {
	for _, started := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			cfg := laneCfg("gql", 10, 10) // 100 ms per slot
			cfg.MaxCost = 5
			h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"gql": newRecSink(nil)})
			defer h.stop()
			if !started {
				if err := h.sh.Pause("gql"); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range []int{5, 1, 3} {
				h.sh.Submit(&queue.Job{Downstream: "gql", Cost: c})
			}
			synctest.Wait()
			if !started {
				h.sh.mu.RLock()
				l := h.sh.active["gql"]
				h.sh.mu.RUnlock()
				l.mu.Lock()
				l.pause.On = false // unpaused but not yet started: the start is due now
				l.mu.Unlock()
			}
			rc := h.sh.Submit(&queue.Job{Downstream: "gql", Cost: 2}) // 9 + 2 > 10
			if rc.Reason != ReasonQueueFull || rc.RetryAfter != 100*time.Millisecond {
				t.Errorf("started=%v: %+v, want queue_full with RetryAfter 100ms", started, rc)
			}
		})
	}
}
