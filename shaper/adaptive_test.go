package shaper

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/policy"
)

// simSink is a downstream in fake time whose limit is a rule: decide says,
// under the sink's lock, whether a try arriving at now is admitted, and if
// not the Retry-After it answers with (0 = none: an *policy.OverloadError). With
// conc > 0 it is a concurrency limit instead: at most conc tries at once,
// each taking hold; beyond it a 503 without Retry-After. Answers are
// recorded by time.
type simSink struct {
	noBatches
	decide func(now time.Time) (ok bool, retryAfter time.Duration)
	conc   int
	hold   time.Duration

	mu       sync.Mutex
	inflight int
	log      []capAnswer
}

type capAnswer struct {
	at time.Time
	ok bool
}

func (s *simSink) Deliver(_ context.Context, _ *queue.Job) (Feedback, error) {
	s.mu.Lock()
	now := time.Now()
	ok, wait := true, time.Duration(0)
	switch {
	case s.conc > 0 && s.inflight >= s.conc:
		ok = false
	case s.conc > 0:
		s.inflight++
	default:
		ok, wait = s.decide(now)
	}
	s.log = append(s.log, capAnswer{now, ok})
	s.mu.Unlock()
	switch {
	case !ok && wait > 0:
		return Feedback{}, &policy.PushbackError{RetryAfter: wait, Err: errors.New("429 with Retry-After")}
	case !ok:
		return Feedback{}, &policy.OverloadError{Err: errors.New("429 Too Many Requests")}
	case s.conc > 0:
		time.Sleep(s.hold)
		s.mu.Lock()
		s.inflight--
		s.mu.Unlock()
	}
	return Feedback{}, nil
}

// since counts successes and refusals answered in [a, b).
func (s *simSink) between(a, b time.Time) (ok, over int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, an := range s.log {
		if an.at.Before(a) || !an.at.Before(b) {
			continue
		}
		if an.ok {
			ok++
		} else {
			over++
		}
	}
	return ok, over
}

// gcraRule admits rate(el) per second (el since the first try) with a
// burst of burst: a token bucket that answers 429 without Retry-After.
func gcraRule(rate func(time.Duration) float64, burst float64) func(time.Time) (bool, time.Duration) {
	var t0, tat time.Time
	return func(now time.Time) (bool, time.Duration) {
		if t0.IsZero() {
			t0 = now
		}
		inc := time.Duration(float64(time.Second) / rate(now.Sub(t0)))
		tat = later(tat, now)
		if tat.Sub(now) > time.Duration(burst*float64(inc)) {
			return false, 0
		}
		tat = tat.Add(inc)
		return true, 0
	}
}

// slidingRule admits limit successes in any sliding window (no Retry-After).
func slidingRule(limit int, window time.Duration) func(time.Time) (bool, time.Duration) {
	var log []time.Time
	return func(now time.Time) (bool, time.Duration) {
		for len(log) > 0 && !log[0].After(now.Add(-window)) {
			log = log[1:]
		}
		if len(log) >= limit {
			return false, 0
		}
		log = append(log, now)
		return true, 0
	}
}

// windowRule admits limit per fixed window (aligned to the fake clock) and
// refuses beyond it with Retry-After: the rest of the window in whole
// seconds, rounded up.
func windowRule(limit int, window time.Duration) func(time.Time) (bool, time.Duration) {
	var idx int64
	used := 0
	return func(now time.Time) (bool, time.Duration) {
		if i := now.UnixNano() / int64(window); i != idx {
			idx, used = i, 0
		}
		if used < limit {
			used++
			return true, 0
		}
		rest := time.Unix(0, (idx+1)*int64(window)).Sub(now)
		return false, time.Duration(math.Ceil(rest.Seconds())) * time.Second
	}
}

func constRate(r float64) func(time.Duration) float64 {
	return func(time.Duration) float64 { return r }
}

// shapeRun is one adaptive lane (ceiling 100/s, concurrency 8) fed 60
// jobs/s for d in front of sink; it samples the effective rate every
// 100 ms.
type shapeRun struct {
	h       *harness
	t0      time.Time
	samples []float64
}

func runAdaptive(t *testing.T, sink Sink, adaptive bool, d time.Duration) *shapeRun {
	cfg := laneCfg("api", 100, 100000)
	cfg.Adaptive, cfg.Concurrency = adaptive, 8
	cfg.Retry = RetryPolicy{MaxAttempts: 100, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}
	r := &shapeRun{h: start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"api": sink}), t0: time.Now()}
	for time.Since(r.t0) < d {
		r.h.submit("api", 6)
		time.Sleep(100 * time.Millisecond)
		r.samples = append(r.samples, r.h.status("api").EffectiveRate)
	}
	return r
}

func (r *shapeRun) cuts() float64 { return testutil.ToFloat64(r.h.met.RateCuts.WithLabelValues("api")) }

// judge returns the achieved share of capacity and the refused share of
// tries over [from, now).
func judge(sink *simSink, t0 time.Time, from time.Duration, capacity float64) (achieved, refused float64) {
	ok, over := sink.between(t0.Add(from), time.Now())
	span := time.Since(t0.Add(from)).Seconds()
	return float64(ok) / (capacity * span), float64(over) / float64(max(ok+over, 1))
}

// TestAdaptiveSettles is the adaptive rate's settling figure, with probing:
// configured 100/s, a token bucket of 40/s burst 4 behind it. From 2 s on
// the effective rate is within ±15 % of 40/s at least 90 % of the time and
// never below 30/s (a probe above the capacity is cut back, not the rate
// collapsed), and the lane delivers at least 95 % of the capacity with at
// most 3 % of tries refused.
func TestAdaptiveSettles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &simSink{decide: gcraRule(constRate(40), 4)}
		r := runAdaptive(t, sink, true, 30*time.Second)
		defer r.h.stop()
		achieved, refused := judge(sink, r.t0, 2*time.Second, 40)
		in, low := 0, 100.0
		after := r.samples[20:]
		for _, v := range after {
			if math.Abs(v-40) <= 6 {
				in++
			}
			low = min(low, v)
		}
		t.Logf("adaptive: from 2 s: %.0f %% of the time within ±15 %% of 40/s, lowest %.1f/s; %.1f %% of capacity, %.2f %% refused; %v cuts",
			100*float64(in)/float64(len(after)), low, 100*achieved, 100*refused, r.cuts())
		if float64(in) < 0.9*float64(len(after)) || low < 30 {
			t.Errorf("rate within ±15 %% %d of %d samples, lowest %.1f (samples %v)", in, len(after), low, fmt.Sprint(r.samples))
		}
		if achieved < 0.95 || refused > 0.03 {
			t.Errorf("from 2 s: %.1f %% of capacity, %.2f %% refused; want >= 95 %% and <= 3 %%", 100*achieved, 100*refused)
		}
		if got := testutil.ToFloat64(r.h.met.RateConfigured.WithLabelValues("api")); got != 100 {
			t.Errorf("configured rate metric %v, want 100", got)
		}
	})
}

// TestFixedRateBaseline: without adaptive control the same setup keeps
// hammering at 100/s and more than half of the tries get a 429.
func TestFixedRateBaseline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &simSink{decide: gcraRule(constRate(40), 4)}
		r := runAdaptive(t, sink, false, 10*time.Second)
		defer r.h.stop()
		_, refused := judge(sink, r.t0, 3*time.Second, 40)
		t.Logf("fixed: 429 share after 3s %.1f%%; effective rate %v", 100*refused, r.h.status("api").EffectiveRate)
		if refused < 0.3 {
			t.Errorf("429 share %.2f, want > 0.3 without adaptive control", refused)
		}
	})
}

// TestAdaptiveOneCutPerEpisode is the collapse: 40 successes in
// any sliding second behind a 100/s ceiling. Refusals keep coming back from
// the window after the cut; they must not cut again, so the rate never
// falls far below the capacity and few cuts are made.
func TestAdaptiveOneCutPerEpisode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &simSink{decide: slidingRule(40, time.Second)}
		r := runAdaptive(t, sink, true, 20*time.Second)
		defer r.h.stop()
		achieved, refused := judge(sink, r.t0, 2*time.Second, 40)
		low := 100.0
		for _, v := range r.samples[20:] {
			low = min(low, v)
		}
		_, over := sink.between(r.t0, time.Now())
		t.Logf("sliding log: %.1f %% of capacity, %.2f %% refused from 2 s; lowest rate after 2 s %.1f; %v cuts for %d refusals",
			100*achieved, 100*refused, low, r.cuts(), over)
		if achieved < 0.9 || refused > 0.05 || low < 30 {
			t.Errorf("%.1f %% of capacity, %.2f %% refused, lowest rate %.1f; want >= 90 %%, <= 5 %%, >= 30/s",
				100*achieved, 100*refused, low)
		}
		if c := r.cuts(); c > float64(over)/3 {
			t.Errorf("%v cuts for %d refusals: echoes cut again", c, over)
		}
	})
}

// TestAdaptiveRetryAfterWindow: 200 per fixed 10 s window, Retry-After to
// its end. The lane learns the window from the Retry-After: it cuts at
// most about once per window and delivers the window's quota.
func TestAdaptiveRetryAfterWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &simSink{decide: windowRule(200, 10*time.Second)}
		r := runAdaptive(t, sink, true, 60*time.Second)
		defer r.h.stop()
		achieved, refused := judge(sink, r.t0, 2*time.Second, 20)
		l := r.h.sh.allLanes()[0]
		l.mu.Lock()
		memory := l.adaptive.Memory()
		l.mu.Unlock()
		t.Logf("10 s window: %.1f %% of capacity, %.2f %% refused; %v cuts in 60 s; memory %v",
			100*achieved, 100*refused, r.cuts(), memory)
		if achieved < 0.9 || refused > 0.05 || r.cuts() > 7 || memory < 5*time.Second {
			t.Errorf("%.1f %% of capacity, %.2f %% refused, %v cuts, memory %v; want >= 90 %%, <= 5 %%, <= 7, >= 5s",
				100*achieved, 100*refused, r.cuts(), memory)
		}
	})
}

// TestAdaptiveConcurrencyLimit: 4 in flight at 100 ms each (40/s), 503
// beyond. The lane learns the limit in flight.
func TestAdaptiveConcurrencyLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &simSink{conc: 4, hold: 100 * time.Millisecond}
		r := runAdaptive(t, sink, true, 20*time.Second)
		defer r.h.stop()
		achieved, refused := judge(sink, r.t0, 2*time.Second, 40)
		t.Logf("concurrency 4: %.1f %% of capacity, %.2f %% refused", 100*achieved, 100*refused)
		if achieved < 0.9 || refused > 0.05 {
			t.Errorf("%.1f %% of capacity, %.2f %% refused; want >= 90 %%, <= 5 %%", 100*achieved, 100*refused)
		}
	})
}

// TestAdaptiveCapacityChanges: 40/s that halves at 10 s and doubles back at
// 20 s; the rate follows within a few seconds each time.
func TestAdaptiveCapacityChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		capacity := func(el time.Duration) float64 {
			if el >= 10*time.Second && el < 20*time.Second {
				return 20
			}
			return 40
		}
		sink := &simSink{decide: gcraRule(capacity, 4)}
		r := runAdaptive(t, sink, true, 30*time.Second)
		defer r.h.stop()
		ok, over := sink.between(r.t0.Add(2*time.Second), time.Now())
		achieved := float64(ok) / (8*40 + 10*20 + 10*40)
		refused := float64(over) / float64(ok+over)
		t.Logf("40 → 20 → 40/s: %.1f %% of capacity, %.2f %% refused; rate at 19 s %.1f, at 30 s %.1f",
			100*achieved, 100*refused, r.samples[189], r.samples[len(r.samples)-1])
		if achieved < 0.85 || refused > 0.05 {
			t.Errorf("%.1f %% of capacity, %.2f %% refused; want >= 85 %%, <= 5 %%", 100*achieved, 100*refused)
		}
		if v := r.samples[189]; v < 17 || v > 25 {
			t.Errorf("rate at 19 s %.1f, want about 20", v)
		}
	})
}

// TestAdaptiveRecovers: an outage (every try refused) cuts the rate well
// down; when the downstream answers again the rate climbs back to the
// ceiling within seconds, and a reload's new ceiling caps it at once.
func TestAdaptiveRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		down := true
		sink := newRecSink(func(context.Context, *queue.Job) error {
			mu.Lock()
			defer mu.Unlock()
			if down {
				return &policy.PushbackError{RetryAfter: 0, Err: errors.New("503")}
			}
			return nil
		})
		cfg := laneCfg("api", 50, 100000)
		cfg.Adaptive = true
		h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"api": sink})
		defer h.stop()
		feed := func(d time.Duration) {
			for t0 := time.Now(); time.Since(t0) < d; {
				h.submit("api", 5)
				time.Sleep(100 * time.Millisecond)
			}
		}
		feed(10 * time.Second)
		if r := h.status("api").EffectiveRate; r > 50*0.25 {
			t.Fatalf("rate after 10 s of outage %v, want <= a quarter of the ceiling", r)
		}
		mu.Lock()
		down = false
		mu.Unlock()
		t0 := time.Now()
		for h.status("api").EffectiveRate < 50 && time.Since(t0) < time.Minute {
			feed(time.Second)
		}
		t.Logf("back at the ceiling 50/s in %v", time.Since(t0))
		if d := time.Since(t0); d > 15*time.Second {
			t.Errorf("rate back at the ceiling after %v, want <= 15s", d)
		}
		cfg.Rate = 20
		if err := h.sh.Apply(Settings{Lanes: []LaneSettings{cfg}}); err != nil {
			t.Fatal(err)
		}
		if r := h.status("api").EffectiveRate; r != 20 {
			t.Errorf("rate after lowering the ceiling %v, want 20", r)
		}
	})
}
