package shaper

import (
	"fmt"
	"time"

	"github.com/shaperd/shaper/shaper/policy"
)

// The lane's policies (package policy): each observes the lane's tries
// and answers a policy.Gate; the lane takes the strictest answer of all,
// with its own configured rate and concurrency folded in, and keeps its
// schedule (schedule.go) alone. What a policy decides reaches the metrics
// and the log through the hooks set here.

// compose wires the lane's policies and lists them in the order they book
// an answer: the advertised quota first (it caps the adaptive rate's
// ceiling and may pause), the adaptive rate, the breaker, the pushback
// pause, the admin API's pause, the kept learned rate (it holds while a
// takeover read is in flight), the maintenance windows. A new policy is a
// field of lane and one entry here.
func (l *lane) compose() {
	l.quota.Pause, l.quota.OnPause = &l.pushback, l.quotaPaused
	l.adaptive.Quota, l.adaptive.OnCut = &l.quota, l.m.RateCuts.Inc
	l.brk.OnEvent = l.breakerEvent
	l.policies = []policy.Policy{&l.quota, &l.adaptive, &l.brk, &l.pushback, &l.pause, &l.kept, &l.maint}
}

// configurePolicies applies cfg to the policies that have settings.
// Requires l.mu.
func (l *lane) configurePolicies(cfg LaneSettings) {
	l.quota.MaxWait = cfg.MaxWait
	l.adaptive.Configure(policy.AdaptiveSettings{On: cfg.Adaptive, Ceiling: cfg.Rate, Concurrency: cfg.Concurrency})
	l.brk.Configure(cfg.Breaker)
	l.kept.Configure(cfg.Adaptive, cfg.Rate)
	l.maint.Configure(cfg.Maintenance)
}

// gate is the strictest answer of the lane's policies at now, with the
// configured rate and concurrency folded into Rate and Limit (so both are
// set). A new rate applies to the schedule at once. Requires l.mu.
func (l *lane) gate(now time.Time) policy.Gate {
	g := policy.Strictest(now, l.inflight, l.sched.last, l.policies).And(policy.Gate{Rate: l.cfg.Rate, Limit: l.cfg.Concurrency})
	if g.Rate != l.sched.rate {
		l.sched.setRate(g.Rate)
	}
	l.limit = g.Limit
	l.updatePaused()
	return g
}

// nextStartAt is the earliest the lane's next start may be, as of now: its
// schedule's next slot, no earlier than any policy allows (a pushback's
// end, an open breaker's probe). It may lie in the past. Requires l.mu.
func (l *lane) nextStartAt(now time.Time) time.Time {
	return later(l.sched.next, l.gate(now).NotBefore)
}

// setRate makes rate an adaptive lane's effective rate, as if its
// controller had learned it; it applies to queued jobs. Requires l.mu.
func (l *lane) setRate(rate float64) {
	l.adaptive.SetRate(rate)
	l.sched.setRate(rate)
	l.updatePaused()
}

// shown is what the lane last exported of its state.
type shown struct {
	paused bool
	maint  bool
	rate   float64
	set    bool
}

// updatePaused exports whether the lane is paused (by the admin API or a
// pushback), whether it is in a maintenance window, and its drain rate:
// the effective rate, 0 while paused by the admin API or in maintenance,
// as /v1/downstreams' effective_rate and the status page say (a
// pushback's or quota's short holds do not zero it). It tells what the
// policies' last Gate saw. Gauges are written only when a value changed.
// Requires l.mu.
func (l *lane) updatePaused() {
	v := shown{paused: l.pause.On || l.pushback.Pausing(), maint: l.maint.Active(), rate: l.sched.rate, set: true}
	if l.pause.On || v.maint {
		v.rate = 0
	}
	if v == l.shown {
		return
	}
	l.shown = v
	l.m.Paused.Set(b2f(v.paused))
	l.m.Maintenance.Set(b2f(v.maint))
	l.m.Rate.Set(v.rate)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// quotaPaused books a pause because the downstream's quota was used up,
// counted as a pushback. Requires l.mu.
func (l *lane) quotaPaused(t policy.Try, until time.Time) {
	l.c.pushbacks++
	l.m.Pushbacks.Inc()
	l.updatePaused()
	l.s.log.Info("downstream quota used up; lane paused until its reset", "downstream", l.name,
		"job_id", t.Job.ID, "until", until)
}

// breakerEvent exports and logs a change of the breaker's state.
// Requires l.mu.
func (l *lane) breakerEvent(ev policy.BreakerEvent, a policy.Answer, probeAt time.Time) {
	switch ev {
	case policy.BreakerTripped:
		l.m.BreakerOpen.Set(1)
		l.m.BreakerTrips.Inc()
		l.s.log.Warn("downstream failing; breaker open, jobs held", "downstream", l.name,
			"failures", l.cfg.Breaker.Failures, "probe_at", probeAt, "error", fmt.Sprint(a.Err))
	case policy.BreakerProbeFailed:
		l.s.log.Warn("breaker probe failed; downstream stays held", "downstream", l.name,
			"job_id", a.Job.ID, "probe_at", probeAt, "error", fmt.Sprint(a.Err))
	case policy.BreakerProbed:
		l.m.BreakerOpen.Set(0)
		l.s.log.Info("breaker probe succeeded; breaker closed", "downstream", l.name, "job_id", a.Job.ID)
	case policy.BreakerReleased:
		l.m.BreakerOpen.Set(0)
		l.s.log.Info("breaker turned off by a reload; held jobs released", "downstream", l.name)
	}
}
