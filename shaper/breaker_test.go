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
	"github.com/shaperd/shaper/shaper/settings"
)

// downUntil is a sink whose downstream answers 503 (a retryable error)
// until t0+d, then succeeds.
func downUntil(d time.Duration) *recSink {
	var s *recSink
	s = newRecSink(func(context.Context, *queue.Job) error {
		if time.Since(s.t0) < d {
			return errors.New("503 Service Unavailable")
		}
		return nil
	})
	return s
}

func breakerCfg(name string, b policy.BreakerSettings) LaneSettings {
	cfg := laneCfg(name, 10, 100)
	cfg.Breaker = b
	cfg.Retry = RetryPolicy{MaxAttempts: 10, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	return cfg
}

// TestBreakerHoldsThroughOutage: 3 failed tries open the breaker for 1 s;
// each failed probe doubles the period up to 4 s; the probe after the
// downstream healed closes it and the held jobs drain at the rate, none
// dead-lettered and none tried while held.
func TestBreakerHoldsThroughOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := downUntil(6 * time.Second)
		cfg := breakerCfg("a", policy.BreakerSettings{Failures: 3, OpenFor: time.Second, MaxOpenFor: 4 * time.Second})
		h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"a": sink})
		defer h.stop()
		h.submit("a", 5)
		open := func(want float64) {
			t.Helper()
			if got := testutil.ToFloat64(h.met.BreakerOpen.WithLabelValues("a")); got != want {
				t.Errorf("shaper_breaker_open = %v, want %v", got, want)
			}
		}
		time.Sleep(500 * time.Millisecond)
		st := h.status("a")
		if st.Breaker != policy.BreakerOpen || st.BreakerUntil == nil || !st.BreakerUntil.Equal(sink.t0.Add(1200*time.Millisecond)) || st.EffectiveRate != 0 {
			t.Errorf("status while open: breaker %q until %v effective %v", st.Breaker, st.BreakerUntil, st.EffectiveRate)
		}
		open(1)
		time.Sleep(2 * time.Second) // t = 2.5 s: the probe at 1.2 s failed, reopened until 3.2 s
		if st := h.status("a"); st.Breaker != policy.BreakerOpen || !st.BreakerUntil.Equal(sink.t0.Add(3200*time.Millisecond)) {
			t.Errorf("after a failed probe: breaker %q until %v, want open until 3.2s", st.Breaker, st.BreakerUntil)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		// Probes at 1.2 s (+1 s), 3.2 s (+2 s) and 7.2 s (+4 s, capped):
		// the last one succeeds and the rest follow at 10/s, from then.
		wantStarts(t, sink.starts(), 0, 0.1, 0.2, 1.2, 3.2, 7.2, 7.3, 7.4, 7.5, 7.6)
		st = h.status("a")
		if st.Breaker != policy.BreakerClosed || st.BreakerUntil != nil || st.Delivered[OutcomeSuccess] != 5 || len(h.dl.list()) != 0 {
			t.Errorf("after: breaker %q, delivered %v, dead letters %v", st.Breaker, st.Delivered, h.dl.list())
		}
		open(0)
		if got := testutil.ToFloat64(h.met.BreakerTrips.WithLabelValues("a")); got != 1 {
			t.Errorf("shaper_breaker_trips_total = %v, want 1 (reopenings are not trips)", got)
		}
	})
}

// TestBreakerAnswersReset: 4xx and pushbacks are answers of a live
// downstream: they reset the count of consecutive failures.
func TestBreakerAnswersReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		answers := []error{errors.New("500"), &policy.PermanentError{Err: errors.New("404")}, errors.New("500"),
			&policy.PushbackError{RetryAfter: 0, Err: errors.New("429")}, errors.New("timeout"), nil,
			errors.New("500"), errors.New("500")}
		var n atomic.Int32
		sink := newRecSink(func(context.Context, *queue.Job) error {
			if i := int(n.Add(1)) - 1; i < len(answers) {
				return answers[i]
			}
			return nil
		})
		h := start(t, Settings{Lanes: []LaneSettings{breakerCfg("a", policy.BreakerSettings{Failures: 2, OpenFor: time.Minute})}},
			map[string]Sink{"a": sink})
		defer h.stop()
		h.submit("a", 10)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := len(sink.starts()); got != len(answers) {
			t.Errorf("%d tries, want %d: open only after the last two 500s", got, len(answers))
		}
		if st := h.status("a"); st.Breaker != policy.BreakerOpen {
			t.Errorf("breaker %q, want open", st.Breaker)
		}
		if got := testutil.ToFloat64(h.met.BreakerTrips.WithLabelValues("a")); got != 1 {
			t.Errorf("trips = %v, want 1", got)
		}
	})
}

// TestBreakerProbeAlone: while the probe is in flight nothing else starts,
// whatever the concurrency; its success restarts the schedule from then.
func TestBreakerProbeAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var first atomic.Bool
		sink := newRecSink(func(context.Context, *queue.Job) error {
			if first.CompareAndSwap(false, true) {
				return errors.New("connection refused")
			}
			time.Sleep(2 * time.Second)
			return nil
		})
		cfg := breakerCfg("a", policy.BreakerSettings{Failures: 1, OpenFor: time.Second})
		cfg.Concurrency = 3
		h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"a": sink})
		defer h.stop()
		h.submit("a", 5)
		time.Sleep(1500 * time.Millisecond)
		if st := h.status("a"); st.Breaker != policy.BreakerHalfOpen || st.Inflight != 1 {
			t.Errorf("during the probe: breaker %q inflight %d, want half_open 1", st.Breaker, st.Inflight)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		wantStarts(t, sink.starts(), 0, 1, 3, 3.1, 3.2, 5)
		if n := sink.peak(); n != 3 {
			t.Errorf("max in flight %d, want 3", n)
		}
	})
}

// TestBreakerExpiresHeldJobs: a held job's max wait still applies; it is
// dropped as expired when the lane reaches it, never sent late.
func TestBreakerExpiresHeldJobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := downUntil(time.Hour)
		cfg := breakerCfg("a", policy.BreakerSettings{Failures: 1, OpenFor: time.Second})
		cfg.MaxWait = 2 * time.Second
		h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"a": sink})
		defer h.stop()
		h.submit("a", 3)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		wantStarts(t, sink.starts(), 0, 1) // the try that opened it and one probe; the next is due at 3 s
		if got := h.dl.reasons(); got[ReasonExpired] != 3 || len(h.dl.list()) != 3 {
			t.Errorf("dead letters %v, want 3 expired", got)
		}
	})
}

// TestBreakerReload: a reload that turns the breaker off releases the held
// jobs at once; one that lowers max_open_for caps the next opening.
func TestBreakerReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := downUntil(3 * time.Second)
		cfg := breakerCfg("a", policy.BreakerSettings{Failures: 1, OpenFor: time.Minute, MaxOpenFor: time.Hour})
		h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"a": sink})
		defer h.stop()
		h.submit("a", 2)
		time.Sleep(5 * time.Second)
		cfg.Breaker = policy.BreakerSettings{}
		if err := h.sh.Apply(Settings{Lanes: []LaneSettings{cfg}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		wantStarts(t, sink.starts(), 0, 5, 5.1)
		if st := h.status("a"); st.Breaker != policy.BreakerClosed || st.Delivered[OutcomeSuccess] != 2 {
			t.Errorf("after turning it off: breaker %q delivered %v", st.Breaker, st.Delivered)
		}
		if got := testutil.ToFloat64(h.met.BreakerOpen.WithLabelValues("a")); got != 0 {
			t.Errorf("shaper_breaker_open = %v after turning it off", got)
		}
	})
}

func TestBreakerSettingsValidated(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    policy.BreakerSettings
		want string // "" = valid
	}{
		{"off", policy.BreakerSettings{}, ""},
		{"defaults", policy.BreakerSettings{Failures: 5}, ""},
		{"negative", policy.BreakerSettings{Failures: -1}, "breaker: values must be >= 0"},
		{"max below", policy.BreakerSettings{Failures: 5, OpenFor: time.Minute, MaxOpenFor: time.Second}, "max open for 1s is below open for 1m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := laneCfg("a", 1, 1)
			cfg.Breaker = tc.b
			got, err := settings.NormalizeLane(cfg)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if tc.b.Failures > 0 && (got.Breaker.OpenFor != policy.DefaultBreakerOpenFor || got.Breaker.MaxOpenFor != policy.DefaultBreakerMaxOpenFor) {
					t.Errorf("defaults: %+v", got.Breaker)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestBreakerRetryAfter: while the breaker holds the lane, a queue_full
// Retry-After names the probe, not the next interval.
func TestBreakerRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := downUntil(time.Hour)
		cfg := breakerCfg("a", policy.BreakerSettings{Failures: 1, OpenFor: time.Minute})
		cfg.Capacity = 2
		h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"a": sink})
		defer h.stop()
		h.submit("a", 1)
		time.Sleep(10 * time.Second)
		rc := h.submit("a", 3) // the retry holds one slot: 1 accepted, then full
		if !rc[0].Accepted || rc[1].Accepted || rc[1].Reason != ReasonQueueFull || rc[1].RetryAfter != 50100*time.Millisecond || rc[0].ETA != 50100*time.Millisecond {
			t.Errorf("receipts %+v, want the first due 100 ms after the probe at 60 s, the second queue_full until then", rc[:2])
		}
	})
}

// TestBreakerDefaultsHoldLongOutage: under the default breaker and retry
// policy, 30 queued jobs outlast an outage of minutes or of an hour (max
// wait longer still): no job is dead-lettered and all 30 are delivered
// once the downstream is back. A failed probe uses no attempt of its job;
// when it did, the hour's probes exhausted a job.
func TestBreakerDefaultsHoldLongOutage(t *testing.T) {
	for _, outage := range []time.Duration{20 * time.Second, 2 * time.Minute, time.Hour} {
		t.Run(outage.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sink := downUntil(outage)
				cfg := laneCfg("a", 10, 100)
				cfg.Breaker = policy.BreakerSettings{Failures: policy.DefaultBreakerFailures} // open_for and max_open_for default
				cfg.MaxWait = 2 * time.Hour
				h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"a": sink})
				defer h.stop()
				h.submit("a", 30)
				time.Sleep(outage + 10*time.Minute) // the last opening is at most 5 m
				synctest.Wait()
				st := h.status("a")
				if n := len(h.dl.list()); n != 0 || st.Delivered[OutcomeSuccess] != 30 {
					t.Fatalf("dead letters %v, delivered %v: want 0 and 30", h.dl.reasons(), st.Delivered)
				}
				failed := 0 // the tries that opened the breaker, then the probes
				for _, tr := range sink.all() {
					if tr.at < outage {
						failed++
					}
				}
				if failed <= policy.DefaultBreakerFailures {
					t.Errorf("%d failed tries: want the %d that opened the breaker, then probes", failed, policy.DefaultBreakerFailures)
				}
			})
		})
	}
}
