package shaper

import (
	"context"
	"math"
	"time"
)

// A learned rate that is kept (Deps.Rates): what an adaptive lane learned — its effective rate and the
// controller's idea of the downstream's window — is saved where every
// instance can read it, so that a restarted daemon, or another instance
// taking over a durable queue's drain, starts where the last drainer was
// rather than at the ceiling.
//
//   - Read: by Apply (so by New) for every lane that becomes adaptive,
//     before it starts anything; and by a durable lane whose queue hands it
//     jobs after it started nothing for takeoverGap (a failover of the
//     pinned drainer looks like that): the lane starts nothing until the
//     read answered (at most keepTimeout).
//   - Used: when not older than LearnedMaxAge and newer than what the lane
//     kept itself; capped by the ceiling (and a reload that lowers the
//     ceiling caps the rate at once, as before), never below keptFloor of
//     it.
//   - Saved: by one goroutine of Run's every keepEvery, for each adaptive
//     lane whose value changed since it was last saved or read (never per
//     job; the bare ceiling is not saved while nothing was learned), again
//     after keepRefresh while the lane starts jobs, and once at shutdown.
const (
	// LearnedMaxAge is the age past which a kept value is ignored.
	LearnedMaxAge = time.Hour
	keepEvery     = 2 * time.Second
	keepRefresh   = LearnedMaxAge / 4
	keepTimeout   = time.Second
	takeoverGap   = 5 * time.Second
	keptFloor     = 0.05
	maxTakeovers  = 64 // takeover reads waiting for the keeper; beyond, the lane goes on unread
)

// Learned is what an adaptive lane learned of its downstream.
type Learned struct {
	Rate   float64       // effective drain rate, starts per second
	Window time.Duration // the downstream's window (memory) as learned; 0 = unknown
	At     time.Time     // when the lane ran at it
}

// Rates keeps learned values by downstream where every instance can read
// them (the daemon: a NATS KV bucket). The shaper calls it from Apply and
// from one goroutine of Run, never under a lane's lock; each call is
// bounded by its ctx. Load reports ok false for a downstream with nothing
// kept.
type Rates interface {
	Load(ctx context.Context, downstream string) (v Learned, ok bool, err error)
	Save(ctx context.Context, downstream string, v Learned) error
}

// keptRate is a lane's side of its kept value. Guarded by lane.mu.
type keptRate struct {
	v         Learned   // last value saved or used; zero = none
	started   uint64    // counters.started when v was saved
	restoring bool      // a takeover read is in flight: no start until it answers
	asked     time.Time // when the value was last read
}

// toSave returns the value to keep at now, the lane's start count, and
// whether it is due to be saved. Requires l.mu.
func (l *lane) toSave(now time.Time) (Learned, uint64, bool) {
	v, k := Learned{Rate: l.sched.rate, Window: l.adaptive.Window(), At: now}, l.kept
	switch {
	case !l.cfg.Adaptive:
		return v, 0, false
	case k.v.At.IsZero(): // nothing learned yet: the ceiling is no news
		return v, l.c.started, v.Rate < l.cfg.Rate || v.Window > 0
	case v.Rate != k.v.Rate || v.Window != k.v.Window:
		return v, l.c.started, true
	}
	return v, l.c.started, l.c.started > k.started && now.Sub(k.v.At) >= keepRefresh
}

// restore makes a kept value the lane's rate at now, and reports whether
// it did: only under Adaptive, for a sane value not older than
// LearnedMaxAge and newer than the lane's own. Requires l.mu.
func (l *lane) restore(v Learned, now time.Time) bool {
	if !l.cfg.Adaptive || !(v.Rate > 0) || math.IsInf(v.Rate, 0) || v.Window < 0 ||
		now.Sub(v.At) > LearnedMaxAge || !v.At.After(l.kept.v.At) {
		return false
	}
	v.Rate = min(max(v.Rate, keptFloor*l.cfg.Rate), l.cfg.Rate)
	l.adaptive.Restore(v.Rate, v.Window, now)
	l.setRate(v.Rate)
	l.kept.v, l.kept.started = v, l.c.started
	l.s.log.Info("adaptive rate restored from the kept value", "downstream", l.name,
		"rate", v.Rate, "window", v.Window, "learned_at", v.At)
	return true
}

// noteFetched asks for the kept value when a durable queue hands the lane
// jobs at now after it started nothing for takeoverGap: another instance
// may have drained until now. Requires l.mu.
func (l *lane) noteFetched(now time.Time) {
	k := &l.kept
	if !l.cfg.Adaptive || l.s.keeper == nil || k.restoring || l.s.closing.Load() ||
		(!l.sched.last.IsZero() && now.Sub(l.sched.last) < takeoverGap) || (!k.asked.IsZero() && now.Sub(k.asked) < takeoverGap) {
		return
	}
	if _, ok := l.q.NextReady(); !ok {
		return
	}
	select {
	case l.s.keeper.reqs <- l:
		k.restoring, k.asked = true, now
	default: // the keeper is behind: go on at the current rate
	}
}

// keeper saves and reads kept values for Run (see the top of this file).
type keeper struct {
	rates    Rates
	reqs     chan *lane // takeover reads
	lastWarn time.Time  // owned by run
}

func newKeeper(r Rates) *keeper {
	if r == nil {
		return nil
	}
	return &keeper{rates: r, reqs: make(chan *lane, maxTakeovers)}
}

// run serves takeover reads and saves every keepEvery until ctx is done,
// then saves once more (within keepTimeout).
func (k *keeper) run(ctx context.Context, s *Shaper) {
	tick := time.NewTicker(keepEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keepTimeout)
			k.saveAll(fctx, s, time.Now())
			cancel()
			return
		case l := <-k.reqs:
			k.reload(ctx, l, time.Now())
		case now := <-tick.C:
			k.saveAll(ctx, s, now)
		}
	}
}

// reload reads l's kept value for a takeover and lets the lane start again.
func (k *keeper) reload(ctx context.Context, l *lane, now time.Time) {
	rctx, cancel := context.WithTimeout(ctx, keepTimeout)
	v, ok, err := k.rates.Load(rctx, l.name)
	cancel()
	if err != nil {
		k.warn(l.s, "reading the kept rate failed; going on at the current rate", l.name, err, now)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.kept.restoring = false
	if ok {
		l.restore(v, now)
	}
	l.sched.restartFrom(now) // no catch-up for the time held
	l.reschedule(now)
}

// saveAll saves every adaptive lane's value that is due, all within one
// keepTimeout.
func (k *keeper) saveAll(ctx context.Context, sh *Shaper, now time.Time) {
	ctx, cancel := context.WithTimeout(ctx, keepTimeout)
	defer cancel()
	for _, l := range sh.allLanes() {
		l.mu.Lock()
		v, started, due := l.toSave(now)
		l.mu.Unlock()
		if !due {
			continue
		}
		if err := k.rates.Save(ctx, l.name, v); err != nil {
			k.warn(sh, "saving the learned rate failed; retrying", l.name, err, now)
			continue
		}
		l.mu.Lock()
		l.kept.v, l.kept.started = v, started
		l.mu.Unlock()
	}
}

// warn logs a store failure at most once a minute.
func (k *keeper) warn(sh *Shaper, msg, downstream string, err error, now time.Time) {
	if now.Sub(k.lastWarn) < time.Minute {
		return
	}
	k.lastWarn = now
	sh.log.Warn(msg, "downstream", downstream, "error", err.Error())
}

// keptRead is one answer of preload.
type keptRead struct {
	v  Learned
	ok bool
}

// preload reads the kept values of the lanes of lanes that become adaptive
// (new, or adaptive only now), all within keepTimeout. Called by Apply
// without s.mu.
func (s *Shaper) preload(lanes []LaneSettings) map[string]keptRead {
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
	if len(names) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), keepTimeout)
	defer cancel()
	out := make(map[string]keptRead, len(names))
	for _, name := range names {
		v, ok, err := s.keeper.rates.Load(ctx, name)
		if err != nil {
			s.log.Warn("reading the kept rate failed; starting at the ceiling", "downstream", name, "error", err.Error())
		}
		out[name] = keptRead{v, ok}
	}
	return out
}

// restoreKept applies what preload read to the lanes now configured.
// Requires s.mu.
func (s *Shaper) restoreKept(read map[string]keptRead, now time.Time) {
	for name, r := range read {
		l := s.active[name]
		if l == nil {
			continue
		}
		l.mu.Lock()
		l.kept.asked = now
		if r.ok && l.restore(r.v, now) {
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
