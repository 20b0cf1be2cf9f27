package shaper

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"time"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/admission"
	"github.com/shaperd/shaper/shaper/settings"
)

// lanePlan is one lane of a new configuration, prepared before anything
// changes so that a failing Apply changes nothing.
type lanePlan struct {
	cfg    LaneSettings
	l      *lane       // existing lane (active or draining); nil = new lane
	sink   Sink        // new sink; nil = keep the lane's
	q      queue.Roles // a new lane's queue; zero = in memory
	adm    admission.Admitter
	newAdm bool // replace the lane's admitter with adm (may be nil)
	ovr    Override
}

// Apply reconfigures the shaper in place without losing queued jobs; New
// uses it for the initial configuration. Safe for concurrent use; it does
// not block on I/O beyond what Deps.Sinks does and, for lanes that become
// adaptive, reading their kept rates from Deps.Rates (at most 1 s in all).
// All of s is validated and every new sink and limiter built first: on
// error nothing changes.
//
//   - A new rate applies to queued jobs: the next start is the last start
//     plus the new interval.
//   - Capacity, concurrency, retry policy and dead-letter subject change in
//     place. A smaller capacity drops nothing; intake refuses until below.
//   - MaxWait applies to jobs accepted from now on (a deadline is set at
//     acceptance).
//   - A changed sink spec builds a new sink for the next starts; in-flight
//     deliveries finish on the old one, which is closed when Run ends.
//   - A changed admission config starts a fresh limiter (keys' state is
//     reset); an unchanged one keeps its state.
//   - A new lane starts at once.
//   - A removed lane stops intake at once (Submit answers
//     unknown_downstream; Pause/Resume ErrUnknownDownstream), keeps
//     delivering what it holds at its last rate (an admin pause is lifted,
//     since nobody could resume it), then disappears from Lanes and from the
//     metrics. Adding it back before then revives it with its queue.
//   - A changed breaker applies in place, keeping its state; one turned off
//     releases the jobs it held at once.
//   - A lane that becomes adaptive starts at its kept rate (learned.go, package keep).
//   - A lane's runtime override (SetOverride) stays over the new values.
func (s *Shaper) Apply(set Settings) error {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	if err := s.apply(set, s.overrides); err != nil {
		return err
	}
	s.file = set
	return nil
}

// apply is Apply of set with the overrides ovs over its lanes. Requires
// s.cfgMu.
func (s *Shaper) apply(set Settings, ovs map[string]Override) error {
	set.Lanes = slices.Clone(set.Lanes)
	for i, ls := range set.Lanes {
		set.Lanes[i] = ovs[ls.Name].Over(ls)
	}
	set, err := settings.Normalize(set)
	if err != nil {
		return err
	}
	kept := s.preload(set.Lanes) // I/O: before s.mu
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return ErrClosed
	}
	plans, err := s.plan(set.Lanes)
	if err != nil {
		return err
	}
	s.grace = set.ShutdownGrace
	now := time.Now()
	keep := make(map[string]bool, len(plans))
	for _, p := range plans {
		keep[p.cfg.Name] = true
		p.ovr = ovs[p.cfg.Name]
		s.applyLane(p, now)
	}
	for name, l := range s.active {
		if !keep[name] {
			s.removeLane(l, now)
		}
	}
	s.restoreKept(kept, now)
	return nil
}

// plan builds the sinks and limiters the new lanes need. Requires s.mu.
func (s *Shaper) plan(lanes []LaneSettings) ([]lanePlan, error) {
	plans := make([]lanePlan, 0, len(lanes))
	var errs []error
	for _, cfg := range lanes {
		p := lanePlan{cfg: cfg, l: s.findLane(cfg.Name), newAdm: true}
		var old LaneSettings
		if p.l != nil {
			p.l.mu.Lock()
			old = p.l.cfg
			p.l.mu.Unlock()
		}
		var err error
		if p.l == nil || !reflect.DeepEqual(old.Sink, cfg.Sink) {
			if p.sink, err = s.sinks(cfg); err == nil && p.sink == nil {
				err = errors.New("sink builder returned no sink")
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("downstream %q: sink: %w", cfg.Name, err))
			}
		}
		if p.l == nil && cfg.Durable && s.qs != nil {
			if p.q, err = s.qs(cfg); err != nil {
				errs = append(errs, fmt.Errorf("downstream %q: queue: %w", cfg.Name, err))
			}
		}
		if p.l != nil && old.Fairness != cfg.Fairness {
			errs = append(errs, fmt.Errorf("downstream %q: fairness cannot change while running; restart", cfg.Name))
		}
		if p.l == nil || !reflect.DeepEqual(old.Admission, cfg.Admission) || !reflect.DeepEqual(old.Limits, cfg.Limits) || old.AdmissionStore != cfg.AdmissionStore || shadowChanged(old, cfg) {
			if p.adm, err = s.newAdmitter(cfg); err != nil {
				errs = append(errs, fmt.Errorf("downstream %q: admission: %w", cfg.Name, err))
			}
		} else {
			p.newAdm = false
		}
		plans = append(plans, p)
	}
	if err := errors.Join(errs...); err != nil {
		for _, p := range plans {
			if c, ok := p.sink.(io.Closer); ok {
				_ = c.Close()
			}
			if p.q.Service != nil {
				_ = p.q.Service.Stop()
			}
		}
		return nil, err
	}
	return plans, nil
}

// findLane returns the active or draining lane called name. Requires s.mu.
func (s *Shaper) findLane(name string) *lane {
	if l := s.active[name]; l != nil {
		return l
	}
	for l := range s.all {
		if l.name == name {
			return l
		}
	}
	return nil
}

// applyLane creates or updates one lane at now. Requires s.mu.
func (s *Shaper) applyLane(p lanePlan, now time.Time) {
	l := p.l
	if l == nil {
		l = newLane(s, p.cfg, p.sink, p.adm, p.q, now)
		l.ovr = p.ovr
		s.active[l.name], s.all[l] = l, struct{}{}
		s.log.Info("downstream added", "downstream", l.name, "rate", p.cfg.Rate)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.removed = false
	l.ovr = p.ovr
	l.setConfig(p.cfg, now)
	if p.sink != nil {
		s.retired.sinks = append(s.retired.sinks, l.sink)
		l.sink = p.sink
	}
	if p.newAdm {
		l.adm = p.adm
	}
	l.noteAdmitter()
	l.reschedule(now)
	s.active[l.name] = l
}

// removeLane stops intake of l at now and lets it drain. Requires s.mu.
func (s *Shaper) removeLane(l *lane, now time.Time) {
	delete(s.active, l.name)
	l.mu.Lock()
	l.removed = true
	if l.pause.Resume() { // nobody could resume it any more: drain now
		l.sched.RestartFrom(now)
	}
	l.reschedule(now)
	idle := l.idle()
	l.mu.Unlock()
	s.log.Info("downstream removed from config; draining what it holds", "downstream", l.name)
	if idle {
		s.retire(l)
	}
}

// newAdmitter builds cfg's admission rule (nil: none), with its counters.
func (s *Shaper) newAdmitter(cfg LaneSettings) (admission.Admitter, error) {
	return admission.New(admission.Settings{
		Lane: cfg.Name, Rule: cfg.Admission, Limits: cfg.Limits, Store: cfg.AdmissionStore,
		Shadow: cfg.Shadow || cfg.AdmissionShadow,
	}, s.adms, admission.Counters{
		Refunds:  s.met.Refunds.WithLabelValues(cfg.Name),
		Shadowed: s.met.Shadow.WithLabelValues(cfg.Name, string(ReasonRateLimited)),
	})
}
