package shaper

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/shaperd/shaper/queue"
)

// capSink is a downstream whose real capacity is rate per second (GCRA,
// tolerating a burst of burst requests): beyond it, it answers 429 without
// Retry-After (an *OverloadError). Counts are by time of the answer.
type capSink struct {
	inc   time.Duration
	burst time.Duration
	mu    sync.Mutex
	tat   time.Time
	log   []capAnswer
}

type capAnswer struct {
	at time.Time
	ok bool
}

func newCapSink(rate float64, burst int) *capSink {
	inc := time.Duration(float64(time.Second) / rate)
	return &capSink{inc: inc, burst: time.Duration(burst) * inc}
}

func (s *capSink) Deliver(_ context.Context, _ *queue.Job) (Feedback, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.tat = later(s.tat, now)
	if s.tat.Sub(now) > s.burst {
		s.log = append(s.log, capAnswer{now, false})
		return Feedback{}, &OverloadError{Err: errors.New("429 Too Many Requests")}
	}
	s.tat = s.tat.Add(s.inc)
	s.log = append(s.log, capAnswer{now, true})
	return Feedback{}, nil
}

// since counts successes and 429s answered at or after t.
func (s *capSink) since(t time.Time) (ok, over int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.log {
		if !a.at.Before(t) {
			if a.ok {
				ok++
			} else {
				over++
			}
		}
	}
	return ok, over
}

// adaptiveRun offers 100 jobs/s for d to a lane configured at 100/s in
// front of a downstream of capacity 40/s, sampling the effective rate
// every 100 ms. It returns the samples, the settle time (after which every
// sample is within ±15 % of 40/s) and the 429 share after settling.
func adaptiveRun(t *testing.T, adaptive bool, d time.Duration) (samples []float64, settle time.Duration, share429 float64, h *harness) {
	sink := newCapSink(40, 4)
	cfg := laneCfg("api", 100, 100000)
	cfg.Adaptive = adaptive
	cfg.Retry = RetryPolicy{MaxAttempts: 10, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}
	h = start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"api": sink})
	t0 := time.Now()
	settled := -1
	for i := 0; time.Since(t0) < d; i++ {
		for range 10 {
			h.sh.Submit(&queue.Job{Downstream: "api"})
		}
		time.Sleep(100 * time.Millisecond)
		r := h.status("api").EffectiveRate
		samples = append(samples, r)
		if r < 34 || r > 46 {
			settled = -1
		} else if settled < 0 {
			settled = i
		}
	}
	if settled < 0 {
		return samples, -1, 1, h
	}
	settle = time.Duration(settled+1) * 100 * time.Millisecond
	ok, over := sink.since(t0.Add(settle))
	return samples, settle, float64(over) / float64(ok+over), h
}

// TestAdaptiveSettles is issue 7's figure: configured 100/s, real capacity
// 40/s. The effective rate settles within ±15 % of 40/s within 3 s and
// stays there; after settling under 3 % of tries get a 429.
func TestAdaptiveSettles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		samples, settle, share, h := adaptiveRun(t, true, 30*time.Second)
		defer h.stop()
		mean := 0.0
		tail := samples[len(samples)/2:]
		for _, r := range tail {
			mean += r / float64(len(tail))
		}
		t.Logf("adaptive: settled at %v; 429 share after %.2f%%; mean effective rate (last 15s) %.1f/s; cuts %v",
			settle, 100*share, mean, testutil.ToFloat64(h.met.rateCuts.WithLabelValues("api")))
		if settle < 0 || settle > 3*time.Second {
			t.Errorf("settle time %v, want <= 3s (samples %v)", settle, fmt.Sprint(samples[:min(40, len(samples))]))
		}
		if share > 0.03 {
			t.Errorf("429 share after settling %.2f%%, want < 3%%", 100*share)
		}
		if got := testutil.ToFloat64(h.met.rateConfigured.WithLabelValues("api")); got != 100 {
			t.Errorf("configured rate metric %v, want 100", got)
		}
		if got := testutil.ToFloat64(h.met.rate.WithLabelValues("api")); got < 34 || got > 46 {
			t.Errorf("drain rate metric %v, want the effective rate near 40", got)
		}
	})
}

// TestFixedRateBaseline: without adaptive control the same setup keeps
// hammering at 100/s and more than half of the tries get a 429.
func TestFixedRateBaseline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newCapSink(40, 4)
		cfg := laneCfg("api", 100, 100000)
		cfg.Retry = RetryPolicy{MaxAttempts: 10, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}
		h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"api": sink})
		defer h.stop()
		t0 := time.Now()
		for time.Since(t0) < 10*time.Second {
			h.submit("api", 10)
			time.Sleep(100 * time.Millisecond)
		}
		ok, over := sink.since(t0.Add(3 * time.Second))
		share := float64(over) / float64(ok+over)
		t.Logf("fixed: 429 share after 3s %.1f%%; effective rate %v", 100*share, h.status("api").EffectiveRate)
		if share < 0.5 {
			t.Errorf("429 share %.2f, want > 0.5 without adaptive control", share)
		}
	})
}

// TestAdaptiveRecovers: when the downstream's capacity returns the rate
// climbs back to the ceiling, and a reload's new ceiling caps it at once.
func TestAdaptiveRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		down := true
		sink := newRecSink(func(context.Context, *queue.Job) error {
			mu.Lock()
			defer mu.Unlock()
			if down {
				return &PushbackError{RetryAfter: 0, Err: errors.New("503")}
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
		feed(5 * time.Second)
		if r := h.status("api").EffectiveRate; r != aimdFloor*50 {
			t.Fatalf("rate during an outage %v, want the floor %v", r, aimdFloor*50)
		}
		mu.Lock()
		down = false
		mu.Unlock()
		t0 := time.Now()
		for h.status("api").EffectiveRate < 50 && time.Since(t0) < time.Minute {
			feed(time.Second)
		}
		t.Logf("back from the floor %v/s to the ceiling 50/s in %v", aimdFloor*50, time.Since(t0))
		if d := time.Since(t0); d > 30*time.Second {
			t.Errorf("rate back at the ceiling after %v, want <= 30s", d)
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
