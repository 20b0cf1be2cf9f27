package shaper

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/pace"
)

// TestSeedBurst is the README's example: 15 jobs at once into capacity 10 at 2/s.
func TestSeedBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecSink(nil)
		h := start(t, Settings{Lanes: []LaneSettings{laneCfg("printer", 2, 10)}}, map[string]Sink{"printer": sink})
		defer h.stop()
		rcs := h.submit("printer", 15)
		for i, rc := range rcs[:10] {
			// Position is i+1, or i once the scheduler has taken job 1
			// (it may run in parallel with the submissions); the ETA is
			// the same either way.
			if !rc.Accepted || (rc.Position != i+1 && rc.Position != i) || rc.JobID == "" {
				t.Fatalf("job %d: %+v, want accepted at position %d", i+1, rc, i+1)
			}
			if rc.ETA != secs(0.5*float64(i)) {
				t.Errorf("job %d: ETA %v, want %v", i+1, rc.ETA, secs(0.5*float64(i)))
			}
		}
		for i, rc := range rcs[10:] {
			if rc.Accepted || rc.Reason != ReasonQueueFull {
				t.Fatalf("job %d: %+v, want queue_full", i+11, rc)
			}
			if rc.RetryAfter <= 0 || rc.RetryAfter > time.Second {
				t.Errorf("job %d: RetryAfter %v, want (0, 1s]", i+11, rc.RetryAfter)
			}
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		wantStarts(t, sink.starts(), 0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5)
		st := h.status("printer")
		if st.Accepted != 10 || st.Rejected[ReasonQueueFull] != 5 || st.Delivered[OutcomeSuccess] != 10 {
			t.Errorf("status %+v", st)
		}
	})
}

// TestIdleThenBurstNoCatchUp: after an idle period the schedule restarts
// from the submission, with no burst for the idle time.
func TestIdleThenBurstNoCatchUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecSink(nil)
		h := start(t, Settings{Lanes: []LaneSettings{laneCfg("a", 10, 100)}}, map[string]Sink{"a": sink})
		defer h.stop()
		h.submit("a", 1)
		time.Sleep(5 * time.Second)
		h.submit("a", 4)
		time.Sleep(30 * time.Millisecond)
		h.submit("a", 1) // arrives while the lane is busy: keeps the schedule
		time.Sleep(5 * time.Second)
		synctest.Wait()
		wantStarts(t, sink.starts(), 0, 5, 5.1, 5.2, 5.3, 5.4)
	})
}

// TestPacingRates checks exact spacing and the window bound at the extremes.
func TestPacingRates(t *testing.T) {
	for _, tc := range []struct {
		name string
		rate float64
		jobs int
	}{
		{"0.1/s", 0.1, 20},
		{"1/s", 1, 20},
		{"10000/s", 10000, 20000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sink := newRecSink(nil)
				h := start(t, Settings{Lanes: []LaneSettings{laneCfg("a", tc.rate, tc.jobs)}}, map[string]Sink{"a": sink})
				defer h.stop()
				h.submit("a", tc.jobs)
				span := secs(float64(tc.jobs) / tc.rate)
				time.Sleep(span)
				synctest.Wait()
				starts := sink.starts()
				if len(starts) != tc.jobs {
					t.Fatalf("%d starts in %v, want %d", len(starts), span, tc.jobs)
				}
				iv := pace.IntervalOf(tc.rate)
				for k, at := range starts {
					if at != time.Duration(k)*iv {
						t.Fatalf("start %d at %v, want %v", k, at, time.Duration(k)*iv)
					}
				}
				checkWindows(t, starts, tc.rate)
			})
		})
	}
}

// checkWindows asserts starts ≤ rate×W×1.1+1 over every window W ≥ 250 ms
// (checked for W = 250 ms, 1 s and 10 s, sliding start to start).
func checkWindows(t *testing.T, starts []time.Duration, rate float64) {
	t.Helper()
	for _, w := range []time.Duration{250 * time.Millisecond, time.Second, 10 * time.Second} {
		limit := int(rate*w.Seconds()*1.1) + 1
		j := 0
		for i := range starts {
			for j < len(starts) && starts[j] < starts[i]+w {
				j++
			}
			if j-i > limit {
				t.Fatalf("%d starts in a %v window from %v, limit %d", j-i, w, starts[i], limit)
			}
		}
	}
}

// TestConcurrencySlowSink: a slow downstream lowers throughput but never
// raises the start rate or the number in flight.
func TestConcurrencySlowSink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecSink(func(ctx context.Context, _ *queue.Job) error {
			time.Sleep(time.Second)
			return nil
		})
		cfg := laneCfg("slow", 10, 100)
		cfg.Concurrency = 2
		h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"slow": sink})
		defer h.stop()
		h.submit("slow", 6)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		// Two start 100 ms apart; each next one when a slot frees (no catch-up).
		wantStarts(t, sink.starts(), 0, 0.1, 1, 1.1, 2, 2.1)
		if n := sink.peak(); n != 2 {
			t.Errorf("max in flight %d, want 2", n)
		}
	})
}

// TestLateSchedulerCatchUpBounded drives a lane's RunDue directly with a
// wake 50 ms late: it makes up at most 20 ms of schedule.
func TestLateSchedulerCatchUpBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecSink(nil)
		cfg := laneCfg("a", 1000, 200)
		cfg.Concurrency = 200
		sh, err := New(Settings{Lanes: []LaneSettings{cfg}}, Deps{
			Sinks: func(LaneSettings) (Sink, error) { return sink, nil }})
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		for range 100 {
			sh.SubmitAt(t0, &queue.Job{Downstream: "a"})
		}
		l := sh.active["a"]
		l.RunDue(t0)
		l.RunDue(t0.Add(50 * time.Millisecond))
		sh.deliveries.Wait()
		if got := len(sink.all()); got != 1+21 {
			t.Fatalf("%d starts, want 22: one at 0, then slots 30..50 ms", got)
		}
		if want := t0.Add(51 * time.Millisecond); !l.sched.Next().Equal(want) {
			t.Errorf("next = %v, want %v", l.sched.Next().Sub(t0), want.Sub(t0))
		}
		_ = sh.deliveries.Stop() // no Run to stop the delivery workers
	})
}
