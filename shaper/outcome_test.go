package shaper

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/policy"
)

// TestPushbackPausesOnlyThatLane: a pushback pauses its lane for exactly
// RetryAfter, retries the job first, and burns no attempt.
func TestPushbackPausesOnlyThatLane(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pushed atomic.Bool
		a := newRecSink(func(context.Context, *queue.Job) error {
			if pushed.CompareAndSwap(false, true) {
				return &policy.PushbackError{RetryAfter: 2 * time.Second, Err: errors.New("429")}
			}
			return nil
		})
		b := newRecSink(nil)
		ca := laneCfg("a", 10, 10)
		ca.Retry.MaxAttempts = 1 // a pushback must not count against it
		h := start(t, Settings{Lanes: []LaneSettings{ca, laneCfg("b", 10, 10)}}, map[string]Sink{"a": a, "b": b})
		defer h.stop()
		first := h.submit("a", 3)[0].JobID
		h.submit("b", 3)
		time.Sleep(time.Second)
		if st := h.status("a"); st.PushbackUntil == nil || !st.PushbackUntil.Equal(a.t0.Add(2*time.Second)) || st.EffectiveRate != 0 {
			t.Errorf("status during pushback: %+v", st)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		wantStarts(t, a.starts(), 0, 2, 2.1, 2.2)
		tries := a.all()
		if tries[1].id != first || tries[1].attempt != 2 {
			t.Errorf("retry = %+v, want job %s attempt 2 first", tries[1], first)
		}
		wantStarts(t, b.starts(), 0, 0.1, 0.2)
		if st := h.status("a"); st.Pushbacks != 1 || st.Delivered[OutcomeSuccess] != 3 || st.PushbackUntil != nil {
			t.Errorf("status after: %+v", st)
		}
	})
}

// TestRetryBackoffThenDeadLetter: retryable errors back off (equal jitter)
// and the job is dead-lettered after MaxAttempts tries numbered 1..N.
func TestRetryBackoffThenDeadLetter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecSink(func(context.Context, *queue.Job) error { return errors.New("503 no retry-after") })
		cfg := laneCfg("a", 100, 10)
		cfg.Retry = RetryPolicy{MaxAttempts: 4, InitialBackoff: time.Second, MaxBackoff: 3 * time.Second}
		h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"a": sink})
		defer h.stop()
		h.submit("a", 1)
		time.Sleep(time.Minute)
		synctest.Wait()
		tries := sink.all()
		if len(tries) != 4 {
			t.Fatalf("tries %+v, want 4", tries)
		}
		// Backoffs d = 1s, 2s, 3s (capped), each jittered in [d/2, d].
		for i, d := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second} {
			gap := tries[i+1].at - tries[i].at
			if gap < d/2 || gap > d {
				t.Errorf("backoff %d = %v, want in [%v, %v]", i+1, gap, d/2, d)
			}
		}
		for i, tr := range tries {
			if tr.attempt != i+1 {
				t.Errorf("try %d has Attempt %d", i, tr.attempt)
			}
		}
		if got := h.dl.reasons(); got[ReasonFailed] != 1 || len(h.dl.dls) != 1 {
			t.Fatalf("dead letters %v", got)
		}
		if dl := h.dl.last(); dl.Subject != "dead.a" || !strings.Contains(dl.Err, "4 attempts failed") {
			t.Errorf("dead letter %+v", dl)
		}
		if st := h.status("a"); st.Retries != 3 || st.Delivered[OutcomeDeadLettered] != 1 || st.Started != 4 {
			t.Errorf("status %+v", st)
		}
	})
}

// TestPermanentFailsAtOnce: a permanent error is not retried; without a
// dead-letter subject the outcome is failed.
func TestPermanentFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecSink(func(context.Context, *queue.Job) error { return &policy.PermanentError{Err: errors.New("404")} })
		cfg := laneCfg("a", 10, 10)
		cfg.DeadLetter = ""
		h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"a": sink})
		defer h.stop()
		h.submit("a", 1)
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(sink.all()); n != 1 {
			t.Fatalf("%d tries, want 1", n)
		}
		if st := h.status("a"); st.Delivered[OutcomeFailed] != 1 || st.Retries != 0 {
			t.Errorf("status %+v", st)
		}
		if dls := h.dl.list(); len(dls) != 0 {
			t.Errorf("dead letter published without a subject: %+v", dls)
		}
	})
}

// TestExpiryDropsWithoutSending: jobs that cannot start by their deadline
// are dead-lettered as expired, never sent, and take no start slot.
func TestExpiryDropsWithoutSending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecSink(nil)
		cfg := laneCfg("a", 1, 10)
		cfg.MaxWait = 2500 * time.Millisecond
		h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"a": sink})
		defer h.stop()
		h.submit("a", 5)
		// A per-job MaxWait overrides the lane's.
		h.sh.Submit(&queue.Job{Downstream: "a", MaxWait: time.Hour})
		time.Sleep(3200 * time.Millisecond)
		h.submit("a", 1)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		// 0,1,2 start; at 3 jobs 4 and 5 expire (no slot used) and the
		// long-lived job starts; the job submitted at 3.2 starts at 4.
		wantStarts(t, sink.starts(), 0, 1, 2, 3, 4)
		if got := h.dl.reasons(); got[ReasonExpired] != 2 || len(got) != 1 {
			t.Errorf("dead letters %v", got)
		}
		if st := h.status("a"); st.Dropped[ReasonExpired] != 2 {
			t.Errorf("status %+v", st)
		}
	})
}

// TestPauseResumeNoBurst: pause stops starts, not intake; resume continues
// from now without a burst.
func TestPauseResumeNoBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecSink(nil)
		h := start(t, Settings{Lanes: []LaneSettings{laneCfg("a", 10, 100)}}, map[string]Sink{"a": sink})
		defer h.stop()
		h.submit("a", 5)
		time.Sleep(250 * time.Millisecond)
		if err := h.sh.Pause("a"); err != nil {
			t.Fatal(err)
		}
		if err := h.sh.Pause("nope"); !errors.Is(err, ErrUnknownDownstream) {
			t.Errorf("Pause(unknown) = %v", err)
		}
		if rc := h.submit("a", 1)[0]; !rc.Accepted {
			t.Errorf("intake while paused: %+v", rc)
		}
		time.Sleep(1750 * time.Millisecond)
		if st := h.status("a"); !st.Paused || st.Depth != 3 {
			t.Errorf("paused status %+v", st)
		}
		// The drain-rate gauge says what effective_rate and the page say.
		if r := testutil.ToFloat64(h.met.Rate.WithLabelValues("a")); r != 0 {
			t.Errorf("shaper_drain_rate_per_second while paused = %v, want 0", r)
		}
		if err := h.sh.Resume("a"); err != nil {
			t.Fatal(err)
		}
		if r := testutil.ToFloat64(h.met.Rate.WithLabelValues("a")); r != 10 {
			t.Errorf("shaper_drain_rate_per_second after resume = %v, want 10", r)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		wantStarts(t, sink.starts(), 0, 0.1, 0.2, 2, 2.1, 2.2)
	})
}
