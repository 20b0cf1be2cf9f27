package shaper

import (
	"fmt"
	"maps"
	"time"

	"github.com/shaperd/shaper/shaper/settings"
)

// What an operator changes at runtime through the admin API: pauses (until
// resumed or timed) and overrides of a lane's configured rate, concurrency
// and capacity. The daemon shares them between instances; the shaper only
// holds them.

// Override is what an operator set over a lane's configured values
// (settings.Override).
type Override = settings.Override

// SetOverride makes o lane name's override, replacing the one it had (a
// zero o returns the lane to its configured values). It applies at once,
// as a reload would (a new rate to the jobs already queued), and stays
// over every later Apply until replaced. It returns ErrUnknownDownstream
// for a name that is not configured, and an error wrapping
// ErrInvalidOverride for values the lane cannot run with.
func (s *Shaper) SetOverride(name string, o Override) error {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	s.mu.RLock()
	l := s.active[name]
	s.mu.RUnlock()
	if l == nil {
		return ErrUnknownDownstream
	}
	for _, ls := range s.file.Lanes {
		if ls.Name != name {
			continue
		}
		if o.MaxJobs != 0 && !ls.Batch.On() {
			return fmt.Errorf("%w: max_jobs: downstream %q sends one job per call; give it a batch in its config first", ErrInvalidOverride, name)
		}
		if _, err := settings.NormalizeLane(o.Over(ls)); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidOverride, err)
		}
	}
	if s.overrides[name] == o {
		return nil
	}
	ovs := maps.Clone(s.overrides)
	if ovs == nil {
		ovs = map[string]Override{}
	}
	if o.IsZero() {
		delete(ovs, name)
	} else {
		ovs[name] = o
	}
	if err := s.apply(s.file, ovs); err != nil {
		return err
	}
	s.overrides = ovs
	return nil
}

// Pause stops lane name from starting jobs until Resume; intake continues
// (jobs queue up to capacity). Pausing a paused lane is a no-op. It returns
// ErrUnknownDownstream for a name that is not configured.
func (s *Shaper) Pause(name string) error { return s.PauseUntil(name, time.Time{}) }

// PauseUntil stops lane name from starting jobs until until, when the
// pause ends by itself and the schedule restarts from there with no burst
// for the time paused; a zero until pauses until Resume. It replaces a
// pause already on; an until already past resumes. Intake continues. It
// returns ErrUnknownDownstream for a name that is not configured.
func (s *Shaper) PauseUntil(name string, until time.Time) error {
	return s.withLane(name, func(l *lane, now time.Time) {
		if !l.pause.Pause(now, until) {
			return
		}
		if !l.pause.On {
			l.sched.RestartFrom(now)
			l.reschedule(now)
			s.log.Info("downstream resumed (a pause until a time already past)", "downstream", name)
			return
		}
		l.reschedule(now)
		if until.IsZero() {
			s.log.Info("downstream paused", "downstream", name)
		} else {
			s.log.Info("downstream paused", "downstream", name, "until", until)
		}
	})
}

// Resume lets lane name start jobs again, continuing the schedule from now
// with no burst for the time paused. Resuming a running lane is a no-op. It
// returns ErrUnknownDownstream for a name that is not configured.
func (s *Shaper) Resume(name string) error {
	return s.withLane(name, func(l *lane, now time.Time) {
		if !l.pause.Resume() {
			return
		}
		l.sched.RestartFrom(now)
		l.reschedule(now)
		s.log.Info("downstream resumed", "downstream", name)
	})
}

// withLane runs fn on the configured lane name under its lock.
func (s *Shaper) withLane(name string, fn func(*lane, time.Time)) error {
	s.mu.RLock()
	l := s.active[name]
	s.mu.RUnlock()
	if l == nil {
		return ErrUnknownDownstream
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.removed {
		return ErrUnknownDownstream
	}
	fn(l, now)
	return nil
}
