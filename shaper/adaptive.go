package shaper

import (
	"errors"
	"math"
	"time"

	"github.com/shaperd/shaper/queue"
)

// Adaptive drain rate (LaneSettings.Adaptive; rate_control: adaptive): the
// configured rate becomes a ceiling, and the lane runs at an effective rate
// steered by the downstream's answers, AIMD-style:
//
//   - Decrease: a 429 or 503 (a *PushbackError, or an *OverloadError when
//     it came without a usable Retry-After) cuts the rate to aimdDecrease
//     of itself, at most once per "round trip": answers to tries started
//     before the last cut were sent at the old rate and do not cut again.
//     A Retry-After is still honoured (the lane pauses until then).
//   - Increase: after a run of successes (aimdRunTime of them at the current
//     rate, at least aimdRunMin) the rate rises toward the ceiling. Near the
//     rate of the last cut (within aimdNear) it rises by aimdSlowStep of the
//     ceiling per run, so it probes the downstream's capacity gently;
//     elsewhere by aimdFastStep of itself (at least the slow step), so it
//     recovers fast after an outage or when capacity grew.
//   - The rate never goes below aimdFloor of the ceiling.
//
// The effective rate is exported as shaper_drain_rate_per_second, the
// ceiling as shaper_drain_rate_configured_per_second. It is scheduler-side,
// so it works on every queue backend.
const (
	aimdDecrease = 0.9
	aimdFloor    = 0.05
	aimdRunTime  = 500 * time.Millisecond
	aimdRunMin   = 5
	aimdNear     = 0.1
	aimdSlowStep = 0.01
	aimdFastStep = 0.1
)

// OverloadError reports an answer meaning "too many requests" that carries
// no usable Retry-After (HTTP 429 or 503 without one). The lane retries it
// with backoff like any failure; under adaptive rate control it also cuts
// the rate.
type OverloadError struct{ Err error }

func (e *OverloadError) Error() string { return e.Err.Error() }
func (e *OverloadError) Unwrap() error { return e.Err }

// aimd is a lane's adaptive rate controller. Guarded by lane.mu.
type aimd struct {
	cut  time.Time // when the rate was last cut
	peak float64   // the rate when it was last cut; 0 = never cut
	run  int       // successes since the rate last changed
}

// reset returns the effective rate for cfg given the current one (0 for a
// new lane): the configured rate, or under Adaptive the current rate
// capped by the (possibly new) ceiling.
func (c *aimd) reset(cfg LaneSettings, current float64) float64 {
	if !cfg.Adaptive || current <= 0 {
		*c = aimd{}
		return cfg.Rate
	}
	return min(current, cfg.Rate)
}

// adapt feeds the outcome of one try to the controller. Requires l.mu.
func (l *lane) adapt(job *queue.Job, err error, now time.Time) {
	if !l.cfg.Adaptive {
		return
	}
	var pb *PushbackError
	var ov *OverloadError
	c := &l.ctl
	switch {
	case err == nil:
		c.run++
		if c.run < max(aimdRunMin, int(math.Ceil(l.rate*aimdRunTime.Seconds()))) || l.rate >= l.ceiling() {
			return
		}
		step := aimdSlowStep * l.cfg.Rate
		if c.peak == 0 || math.Abs(l.rate-c.peak) > aimdNear*c.peak {
			step = max(step, aimdFastStep*l.rate)
		}
		c.run = 0
		l.setRate(min(l.rate+step, l.ceiling()))
	case errors.As(err, &pb) || errors.As(err, &ov):
		if job.Slot.Before(c.cut) {
			return // sent at the old rate
		}
		c.cut, c.peak, c.run = now, l.rate, 0
		l.m.rateCuts.Inc()
		l.setRate(max(l.rate*aimdDecrease, aimdFloor*l.cfg.Rate))
	}
}
