package shaper

import (
	"context"
	"time"

	"github.com/shaperd/shaper/shaper/policy"
)

// The keeper keeps what adaptive lanes learned (Deps.Rates) by the rules
// of policy.Kept: it reads a lane's kept value by Apply (so by New) for
// every lane that becomes adaptive, and for a takeover (a durable lane
// handed jobs after a gap), waiting at most keepTimeout; it saves the due
// values from one goroutine of Run every keepEvery, and once at shutdown.
const (
	keepEvery    = 2 * time.Second
	keepTimeout  = time.Second
	maxTakeovers = 64 // takeover reads waiting for the keeper; beyond, the lane goes on unread
)

// Rates keeps learned values by downstream where every instance can read
// them (the daemon: a NATS KV bucket). The shaper calls it from Apply and
// from one goroutine of Run, never under a lane's lock; each call is
// bounded by its ctx. Load reports ok false for a downstream with nothing
// kept.
type Rates interface {
	Load(ctx context.Context, downstream string) (v policy.Learned, ok bool, err error)
	Save(ctx context.Context, downstream string, v policy.Learned) error
}

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
	if l.s.keeper == nil || l.s.closing.Load() || !l.kept.Takeover(now, l.sched.last) {
		return
	}
	if _, ok := l.q.NextReady(); !ok {
		return
	}
	select {
	case l.s.keeper.reqs <- l:
		l.kept.Asking(now)
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
	l.kept.Answered()
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
		v, starts, due := l.kept.ToSave(now, l.sched.rate, l.adaptive.Window())
		l.mu.Unlock()
		if !due {
			continue
		}
		if err := k.rates.Save(ctx, l.name, v); err != nil {
			k.warn(sh, "saving the learned rate failed; retrying", l.name, err, now)
			continue
		}
		l.mu.Lock()
		l.kept.Saved(v, starts)
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
	v  policy.Learned
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
		l.kept.Asked(now)
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
