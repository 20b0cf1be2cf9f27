package shaper

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/policy"
)

// windowSink is a downstream admitting limit tries per fixed window
// (aligned to the fake clock's whole windows), each taking hold to answer,
// and advertising its quota on every answer as the HTTP sink would read
// it: Limit, Remaining and Reset in whole seconds, rounded up. Beyond the
// quota it answers 429 (a pushback until the reset).
type windowSink struct {
	noBatches
	limit  int
	window time.Duration
	hold   time.Duration
	noLim  bool // advertise Remaining and Reset only

	mu       sync.Mutex
	idx      int64
	used     int
	ok, over int
	inflight int
	peak     int // most tries in flight at once
}

func (s *windowSink) Deliver(ctx context.Context, _ *queue.Job) (Feedback, error) {
	s.mu.Lock()
	now := time.Now()
	if i := now.UnixNano() / int64(s.window); i != s.idx {
		s.idx, s.used = i, 0
	}
	s.inflight++
	s.peak = max(s.peak, s.inflight)
	end := time.Unix(0, (s.idx+1)*int64(s.window))
	reset := time.Duration((end.Sub(now) + time.Second - 1) / time.Second * time.Second)
	var err error
	if s.used >= s.limit {
		s.over++
		err = &policy.PushbackError{RetryAfter: reset, Err: errors.New("429")}
	} else {
		s.used++
		s.ok++
	}
	q := &policy.Quota{Limit: s.limit, Remaining: s.limit - s.used, Reset: reset}
	if s.noLim {
		q.Limit = 0
	}
	s.mu.Unlock()
	if s.hold > 0 {
		time.Sleep(s.hold)
	}
	s.mu.Lock()
	s.inflight--
	s.mu.Unlock()
	return Feedback{Quota: q}, err
}

func (s *windowSink) counts() (ok, over, peak int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ok, s.over, s.peak
}

// TestQuotaRemainingZeroPauses: a fixed lane at 100/s in front of 10 per
// second that says so pauses at "remaining 0" until the reset, and never
// gets a 429: 10 starts a second, the pauses counted as pushbacks.
func TestQuotaRemainingZeroPauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &windowSink{limit: 10, window: time.Second}
		cfg := laneCfg("api", 100, 1000)
		h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"api": sink})
		defer h.stop()
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second))) // a window's start
		h.submit("api", 55)
		time.Sleep(5500 * time.Millisecond)
		ok, over, _ := sink.counts()
		if ok != 55 || over != 0 {
			t.Errorf("%d delivered, %d refused; want 55 and 0 (the lane waits for the reset)", ok, over)
		}
		if n := testutil.ToFloat64(h.met.Pushbacks.WithLabelValues("api")); n < 5 {
			t.Errorf("pushbacks %v, want a pause per exhausted window (>= 5)", n)
		}
	})
}

// TestQuotaInflight: with the concurrency to spare, the lane never has more
// tries in flight than the downstream's remaining quota allows.
func TestQuotaInflight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &windowSink{limit: 6, window: time.Second, hold: 300 * time.Millisecond}
		cfg := laneCfg("api", 100, 1000)
		cfg.Concurrency = 20
		h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"api": sink})
		defer h.stop()
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
		h.submit("api", 1) // the first answer tells the quota
		time.Sleep(time.Second)
		h.submit("api", 30)
		time.Sleep(8 * time.Second)
		// Without the bound the lane would start 20 at once and 14 would
		// be refused: each try is refused or not when it arrives.
		ok, over, peak := sink.counts()
		if ok != 31 || over != 0 || peak > 6 {
			t.Errorf("delivered %d, refused %d, peak in flight %d; want 31, 0, <= 6", ok, over, peak)
		}
	})
}

// TestQuotaCapsAdaptive: under adaptive control an advertised 20 per
// second caps the effective rate at 20/s, below the 100/s ceiling, with no
// refusal; a fixed lane keeps its configured rate.
func TestQuotaCapsAdaptive(t *testing.T) {
	for _, adaptive := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			sink := &windowSink{limit: 20, window: time.Second, noLim: false}
			cfg := laneCfg("api", 100, 1000)
			cfg.Adaptive = adaptive
			h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"api": sink})
			defer h.stop()
			h.submit("api", 100)
			time.Sleep(6 * time.Second)
			ok, over, _ := sink.counts()
			want := 100.0
			if adaptive {
				want = 20
			}
			st := h.status("api")
			if st.Rate != 100 {
				t.Errorf("configured rate %v, want 100", st.Rate)
			}
			if q := st.AdvertisedQuota; q == nil || q.Limit != 20 || q.WindowSeconds != 1 || q.Remaining == nil {
				t.Errorf("adaptive=%v: advertised quota %+v, want 20 per 1 s with the remaining count", adaptive, q)
			}
			if r := testutil.ToFloat64(h.met.Rate.WithLabelValues("api")); r != want {
				t.Errorf("adaptive=%v: drain rate %v, want %v", adaptive, r, want)
			}
			if ok != 100 || over != 0 {
				t.Errorf("adaptive=%v: %d delivered, %d refused, want 100 and 0", adaptive, ok, over)
			}
		})
	}
}

// quotaFeedbackSink answers every try with fb.
type quotaFeedbackSink struct {
	noBatches
	fb Feedback
}

func (s quotaFeedbackSink) Deliver(context.Context, *queue.Job) (Feedback, error) { return s.fb, nil }

// TestQuotaPauseBounded: "remaining 0, reset in an hour" pauses a lane no
// longer than its max wait; malformed fields are counted.
func TestQuotaPauseBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := quotaFeedbackSink{fb: Feedback{Quota: &policy.Quota{Remaining: 0, Reset: policy.MaxQuotaPause}, Malformed: 2}}
		cfg := laneCfg("api", 10, 100)
		cfg.MaxWait = 3 * time.Second
		h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"api": sink})
		defer h.stop()
		t0 := time.Now()
		h.submit("api", 1)
		time.Sleep(time.Second)
		h.submit("api", 1) // its max wait ends after the pause
		st := h.status("api")
		if st.PushbackUntil == nil || st.PushbackUntil.Sub(t0) > 3100*time.Millisecond || st.Started != 1 {
			t.Fatalf("pushback until %v (from %v), started %d; want a pause of at most max_wait after 1 start",
				st.PushbackUntil, t0, st.Started)
		}
		if n := testutil.ToFloat64(h.met.BadHeaders.WithLabelValues("api")); n != 2 {
			t.Errorf("bad headers counted %v, want 2", n)
		}
		time.Sleep(2500 * time.Millisecond)
		if st := h.status("api"); st.Started != 2 {
			t.Errorf("started %d after the pause, want 2", st.Started)
		}
	})
}
