package shaper

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/shaperd/shaper/queue"
)

// fairRun is the fairness figure of BENCHMARKS.md: a lane at 100/s, capacity 200;
// nine tenants each send 5 jobs/s; with flood, a tenth sends 500/s (100×).
// It returns the nine's worst and mean wait, and the flooder's receipts.
func fairRun(t *testing.T, fair, flood bool) (worst, mean time.Duration, flooder []Receipt, h *harness) {
	var mu sync.Mutex
	var waits []time.Duration
	sink := newRecSink(func(_ context.Context, j *queue.Job) error {
		if j.Key != "flood" {
			mu.Lock()
			waits = append(waits, time.Since(j.Enqueued))
			mu.Unlock()
		}
		return nil
	})
	cfg := laneCfg("api", 100, 200)
	cfg.Fairness, cfg.KeyCapacity = fair, 20
	if !fair {
		cfg.KeyCapacity = 0
	}
	h = start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"api": sink})
	tenants := []string{"t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"}
	for tick := range 1000 { // 10 s in 10 ms ticks
		if tick%20 < len(tenants) { // each tenant every 200 ms, staggered
			h.sh.Submit(&queue.Job{Downstream: "api", Key: tenants[tick%20]})
		}
		if flood {
			for range 5 {
				flooder = append(flooder, h.sh.Submit(&queue.Job{Downstream: "api", Key: "flood"}))
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(5 * time.Second)
	synctest.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(waits) != 9*50 {
		t.Errorf("the nine tenants got %d starts, want %d", len(waits), 9*50)
	}
	for _, w := range waits {
		worst = max(worst, w)
		mean += w / time.Duration(len(waits))
	}
	return worst, mean, flooder, h
}

func TestFairnessUnderFlood(t *testing.T) {
	var base, flooded, fifo time.Duration
	synctest.Test(t, func(t *testing.T) {
		w, m, _, h := fairRun(t, true, false)
		defer h.stop()
		base = w
		t.Logf("fair, no flood: nine tenants' wait max %v mean %v", w, m)
	})
	synctest.Test(t, func(t *testing.T) {
		w, m, fl, h := fairRun(t, true, true)
		defer h.stop()
		flooded = w
		acc, full := 0, 0
		for _, rc := range fl {
			switch {
			case rc.Accepted:
				acc++
			case rc.Reason == ReasonQueueFull && rc.RetryAfter > 0:
				full++
			default:
				t.Fatalf("flooder receipt %+v", rc)
			}
		}
		st := h.status("api")
		t.Logf("fair, flood 500/s: nine tenants' wait max %v mean %v; flooder accepted %d, queue_full %d (all with Retry-After); active keys %v",
			w, m, acc, full, testutil.ToFloat64(h.met.FairKeys.WithLabelValues("api")))
		if st.Rejected[ReasonQueueFull] != uint64(full) {
			t.Errorf("queue_full %d, want only the flooder's %d", st.Rejected[ReasonQueueFull], full)
		}
		// Honest Retry-After: the flooder holds its share; after the
		// Retry-After it is given, a slot of its share has freed.
		synctest.Wait() // starts due at this instant run first: time is frozen while we submit
		// Until the first refusal: a flood job may still start at this
		// instant while we submit (the scheduler's goroutine runs beside
		// this one), freeing a place of its share.
		var rc Receipt
		for range 40 {
			if rc = h.sh.Submit(&queue.Job{Downstream: "api", Key: "flood"}); !rc.Accepted {
				break
			}
		}
		if rc.Accepted || rc.RetryAfter <= 0 {
			t.Fatalf("flooder at its share: %+v", rc)
		}
		time.Sleep(rc.RetryAfter)
		synctest.Wait() // the start due at this instant runs before the retry
		if rc2 := h.sh.Submit(&queue.Job{Downstream: "api", Key: "flood"}); !rc2.Accepted {
			t.Errorf("flooder after its Retry-After %v: %+v", rc.RetryAfter, rc2)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		w, m, _, h := fairRun(t, false, true)
		defer h.stop()
		fifo = w
		t.Logf("FIFO, flood 500/s: nine tenants' wait max %v mean %v; rejected %v", w, m, h.status("api").Rejected[ReasonQueueFull])
	})
	// The bound: with fairness the nine wait at most one round of the ten
	// keys (10 intervals = 100 ms) longer than without the flood.
	if flooded > base+100*time.Millisecond {
		t.Errorf("with flood the nine wait up to %v, without %v: more than 100ms worse", flooded, base)
	}
	if fifo < time.Second {
		t.Errorf("FIFO baseline: nine wait up to %v; the flood should hurt them without fairness", fifo)
	}
}
