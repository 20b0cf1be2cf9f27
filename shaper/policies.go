package shaper

import (
	"fmt"
	"time"

	"github.com/shaperd/shaper/shaper/policy"
)

// The lane's policies (package policy): each answers a policy.Gate, and
// plays the optional roles it has something to do in (policy/roles.go);
// the lane asks them all through their policy.Set, takes the strictest
// answer, with its own configured rate and concurrency folded in, and
// keeps its schedule (schedule.go) alone. What a policy decides comes back
// as a policy.Event, which the lane logs and counts (report).

// compose lists the lane's policies in the order they book a try or an
// answer: the advertised quota, the adaptive rate, the breaker, the
// pushback pause (the quota's pause goes through it), the admin API's
// pause, the kept learned rate (it holds while a takeover read is in
// flight), the maintenance windows. None holds a pointer to another or a
// func of the lane. A new policy is a field of lane and one entry here.
func (l *lane) compose() {
	l.policies = policy.Compose(&l.quota, &l.adaptive, &l.brk, &l.pushback, &l.pause, &l.kept, &l.maint)
}

// configurePolicies applies cfg to the policies that have settings.
// Requires l.mu.
func (l *lane) configurePolicies(cfg LaneSettings) {
	l.quota.MaxWait = cfg.MaxWait
	l.adaptive.Configure(policy.AdaptiveSettings{On: cfg.Adaptive, Ceiling: cfg.Rate, Concurrency: cfg.Concurrency})
	l.report(l.brk.Configure(cfg.Breaker), policy.Answer{})
	l.kept.Configure(cfg.Adaptive, cfg.Rate)
	l.maint.Configure(cfg.Maintenance)
}

// gate is the strictest answer of the lane's policies at now, with the
// configured rate and concurrency folded into Rate and Limit (so both are
// set). A new rate applies to the schedule at once. Requires l.mu.
func (l *lane) gate(now time.Time) policy.Gate {
	g, m := l.policies.Gate(now, l.inflight, l.sched.Last())
	g = g.And(policy.Gate{Rate: l.cfg.Rate, Limit: l.cfg.Concurrency})
	if g.Rate*float64(l.perCall()) != l.sched.Rate() {
		l.setPace(g.Rate)
	}
	l.limit = g.Limit
	l.show(m)
	return g
}

// nextStartAt is the earliest the lane's next start may be, as of now: its
// schedule's next slot, no earlier than any policy allows (a pushback's
// end, an open breaker's probe). It may lie in the past. Requires l.mu.
func (l *lane) nextStartAt(now time.Time) time.Time {
	return later(l.sched.Next(), l.gate(now).NotBefore)
}

// scheduled reports whether the policies schedule any start as of now: not
// while one holds the lane until someone resumes it. Requires l.mu.
func (l *lane) scheduled(now time.Time) bool {
	_, ok := l.policies.Forecast(now, 0)
	return ok
}

// setRate makes rate an adaptive lane's effective rate, as if its
// controller had learned it; it applies to queued jobs. Requires l.mu.
func (l *lane) setRate(rate float64) {
	l.adaptive.SetRate(rate)
	l.setPace(rate)
	l.show(l.shown.mark)
}

// shown is what the lane last exported of its state.
type shown struct {
	mark policy.Mark
	rate float64
	set  bool
}

// show exports whether the lane is paused (by the admin API or a
// pushback), whether it is in a maintenance window, and its drain rate:
// the effective rate, 0 while paused by the admin API or in maintenance,
// as /v1/downstreams' effective_rate and the status page say (a
// pushback's or quota's short holds do not zero it). It tells what the
// policies' last Gate marked (m). Gauges are written only when a value
// changed. Requires l.mu.
func (l *lane) show(m policy.Mark) {
	v := shown{mark: m, rate: l.paceRate(), set: true}
	if m&policy.MarkIdle != 0 {
		v.rate = 0
	}
	if v == l.shown {
		return
	}
	l.shown = v
	l.m.Paused.Set(b2f(m&policy.MarkPaused != 0))
	l.m.Maintenance.Set(b2f(m&policy.MarkMaintenance != 0))
	l.m.Rate.Set(v.rate)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// report logs and exports what a policy decided on the answer a (zero
// for a reload). A pushback's pause is the retry's to log (onPushback).
// Requires l.mu.
func (l *lane) report(ev policy.Event, a policy.Answer) {
	switch ev.Kind {
	case policy.QuotaPaused: // counted as a pushback
		l.c.pushbacks++
		l.m.Pushbacks.Inc()
		l.s.log.Info("downstream quota used up; lane paused until its reset", "downstream", l.name,
			"job_id", a.Job.ID, "until", ev.At)
	case policy.RateCut:
		l.m.RateCuts.Inc()
	case policy.BreakerTripped:
		l.m.BreakerOpen.Set(1)
		l.m.BreakerTrips.Inc()
		l.s.log.Warn("downstream failing; breaker open, jobs held", "downstream", l.name,
			"failures", l.cfg.Breaker.Failures, "probe_at", ev.At, "error", fmt.Sprint(a.Err))
	case policy.BreakerProbeFailed:
		l.s.log.Warn("breaker probe failed; downstream stays held", "downstream", l.name,
			"job_id", a.Job.ID, "probe_at", ev.At, "error", fmt.Sprint(a.Err))
	case policy.BreakerProbed:
		l.m.BreakerOpen.Set(0)
		l.s.log.Info("breaker probe succeeded; breaker closed", "downstream", l.name, "job_id", a.Job.ID)
	case policy.BreakerReleased:
		l.m.BreakerOpen.Set(0)
		l.s.log.Info("breaker turned off by a reload; held jobs released", "downstream", l.name)
	}
}
