package limiter

import (
	"sync"
	"time"
)

// Limiter is one limit for a single key, for any Mode: the keyless
// counterpart of Keyed, used like rate.Limiter. It is safe for concurrent
// use; a decision takes a mutex and does not allocate (except a sliding
// log growing toward its Limit). The zero value is not usable: call
// NewLimiter.
type Limiter struct {
	mu     sync.Mutex
	clock  clock
	max    int
	what   string
	decide func(now int64, cost int) Decision // guarded by mu
}

// NewLimiter validates cfg (MaxKeys is ignored) and returns a limiter in the
// state of a key never seen.
func NewLimiter(cfg Config) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Limiter{}
	switch cfg.Mode {
	case TokenBucketMode:
		r, _ := NewTokenBucket(cfg.Rate, cfg.Burst)
		l.max, l.what, l.decide = r.capacity(), r.capacityName(), single[TokenBucketState](r)
	case GCRAMode:
		r, _ := NewGCRA(cfg.Rate, cfg.Burst)
		l.max, l.what, l.decide = r.capacity(), r.capacityName(), single[GCRAState](r)
	case FixedWindowMode:
		r, _ := NewFixedWindow(cfg.Limit, cfg.Window)
		l.max, l.what, l.decide = r.capacity(), r.capacityName(), single[FixedWindowState](r)
	case SlidingCounterMode:
		r, _ := NewSlidingCounter(cfg.Limit, cfg.Window)
		l.max, l.what, l.decide = r.capacity(), r.capacityName(), single[SlidingCounterState](r)
	case SlidingLogMode:
		r, _ := NewSlidingLog(cfg.Limit, cfg.Window)
		l.max, l.what, l.decide = r.capacity(), r.capacityName(), single[SlidingLogState](r)
	}
	return l, nil
}

// single returns a decision function over one state, fresh on first use.
func single[S any, R rule[S]](r R) func(now int64, cost int) Decision {
	var s S
	started := false
	return func(now int64, cost int) Decision {
		if !started {
			r.init(&s, now)
			started = true
		}
		return r.decide(&s, now, cost)
	}
}

// AllowAt decides whether cost units may pass at now and, if so, spends
// them. The error is non-nil only for cost < 1 (ErrInvalidCost) or a cost
// that can never be admitted (ErrCostTooLarge); the Decision is then zero.
func (l *Limiter) AllowAt(now time.Time, cost int) (Decision, error) {
	if cost < 1 || cost > l.max {
		return Decision{}, checkCost(cost, l.max, l.what)
	}
	t := l.clock.ns(now)
	l.mu.Lock()
	d := l.decide(t, cost)
	l.mu.Unlock()
	return d, nil
}

// Allow is AllowAt(time.Now(), 1).Allowed.
func (l *Limiter) Allow() bool {
	d, _ := l.AllowAt(time.Now(), 1)
	return d.Allowed
}
