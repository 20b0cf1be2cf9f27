package shaper

import (
	"time"

	"github.com/shaperd/shaper/shaper/keep"
	"github.com/shaperd/shaper/shaper/policy"
)

// The lane's side of its kept learned rate: package keep reads and saves
// the values (Deps.Rates) by the rules of policy.Kept, and sees a lane
// through keep.Lane (below); the lane restores what it reads.

// Rates keeps learned values by downstream where every instance can read
// them (keep.Rates).
type Rates = keep.Rates

// restore makes a kept value the lane's rate at now, and reports whether
// it did (policy.Kept.Restore says when). Requires l.mu.
func (l *lane) restore(v policy.Learned, now time.Time) bool {
	v, ok := l.kept.Restore(v, now)
	if !ok {
		return false
	}
	l.adaptive.Restore(v.Rate, v.Window, now)
	l.setRate(v.Rate)
	l.s.log.Info("adaptive rate restored from the kept value", "downstream", l.name,
		"rate", v.Rate, "window", v.Window, "learned_at", v.At)
	return true
}

// noteFetched asks the keeper for the kept value when a durable queue hands
// the lane jobs at now and policy.Kept calls it a takeover; the lane's
// starts are held until the read answers. Requires l.mu.
func (l *lane) noteFetched(now time.Time) {
	if l.s.keeper == nil || l.s.closing.Load() || !l.kept.Takeover(now, l.sched.Last()) {
		return
	}
	if _, ok := l.q.NextReady(); !ok {
		return
	}
	if l.s.keeper.Ask(l) {
		l.kept.Asking(now)
	} // else the keeper is behind: go on at the current rate
}

// KeptName is the lane's key in Deps.Rates (keep.Lane).
func (l *lane) KeptName() string { return l.name }

// ToSave returns the lane's learned value at now and whether it is due to
// be saved (keep.Lane).
func (l *lane) ToSave(now time.Time) (policy.Learned, uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.kept.ToSave(now, l.paceRate(), l.adaptive.Window())
}

// Saved records that v was saved (keep.Lane).
func (l *lane) Saved(v policy.Learned, starts uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.kept.Saved(v, starts)
}

// Reloaded takes what a takeover read found and lets the lane start again
// (keep.Lane).
func (l *lane) Reloaded(v policy.Learned, ok bool, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.kept.Answered()
	if ok {
		l.restore(v, now)
	}
	l.sched.RestartFrom(now) // no catch-up for the time held
	l.reschedule(now)
}

// keptLanes is every lane, for the keeper.
func (s *Shaper) keptLanes() []keep.Lane {
	lanes := s.allLanes()
	out := make([]keep.Lane, len(lanes))
	for i, l := range lanes {
		out[i] = l
	}
	return out
}

// preload reads the kept values of the lanes of lanes that become adaptive
// (new, or adaptive only now), all within keep.Timeout. Called by Apply
// without s.mu.
func (s *Shaper) preload(lanes []LaneSettings) map[string]keep.Read {
	if s.keeper == nil {
		return nil
	}
	var names []string
	s.mu.RLock()
	for _, ls := range lanes {
		if l := s.findLane(ls.Name); ls.Adaptive && (l == nil || !l.keptAdaptive()) {
			names = append(names, ls.Name)
		}
	}
	s.mu.RUnlock()
	return s.keeper.Load(names)
}

// restoreKept applies what preload read to the lanes now configured.
// Requires s.mu.
func (s *Shaper) restoreKept(read map[string]keep.Read, now time.Time) {
	for name, r := range read {
		l := s.active[name]
		if l == nil {
			continue
		}
		l.mu.Lock()
		l.kept.Asked(now)
		if r.OK && l.restore(r.V, now) {
			l.reschedule(now)
		}
		l.mu.Unlock()
	}
}

// keptAdaptive reports whether the lane is under adaptive rate control.
func (l *lane) keptAdaptive() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg.Adaptive
}
