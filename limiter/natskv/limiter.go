package natskv

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/shaperd/shaper/limiter"
)

// Options are one limiter's policies.
type Options struct {
	// FailClosed makes a decision the store could not make an error
	// wrapping ErrUnavailable; false admits it (fail open).
	FailClosed bool
	// Approximate answers from a local copy reconciled in the background
	// every Settings.SyncInterval (token_bucket and gcra only); see the
	// package doc for the error bound.
	Approximate bool
}

// Limiter is one downstream's admission limit kept in the store's bucket,
// with the methods the shaper's lanes call (the shape of limiter.Keyed).
// Decisions do network I/O bounded by Settings.Timeout, so callers must not
// hold locks others wait on. Safe for concurrent use.
type Limiter struct {
	st    *Store
	name  string
	opts  Options
	max   int // largest admissible cost
	eng   engine
	close sync.Once
}

// engine is the exact or approximate decision path for one state type.
type engine interface {
	// allow decides for KV key k; an error is a store error (cost errors
	// are caught before).
	allow(ctx context.Context, k string, now int64, cost int) (limiter.Decision, error)
	// refund gives KV key k back cost units charged at now; an error is a
	// store error.
	refund(ctx context.Context, k string, now int64, cost int) error
	// costErr returns the rule's error for an inadmissible cost.
	costErr(now int64, cost int) error
	sweep(now int64) int
	stop()
}

// Limiter returns the limiter of downstream (a subject token) for cfg.
// Approximate mode starts a goroutine, stopped by Close or the store's
// Close. It does no I/O.
func (st *Store) Limiter(downstream string, cfg limiter.Config, opts Options) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !validBucket(downstream) {
		return nil, fmt.Errorf("natskv: downstream %q is not a subject token", downstream)
	}
	if opts.Approximate && cfg.Mode != limiter.TokenBucketMode && cfg.Mode != limiter.GCRAMode {
		return nil, fmt.Errorf("natskv: approximate mode supports token_bucket and gcra, not %s", cfg.Mode)
	}
	l := &Limiter{st: st, name: downstream, opts: opts, max: cfg.Burst}
	var err error
	switch cfg.Mode {
	case limiter.TokenBucketMode:
		l.eng, err = build(l, tokenBucketAlgo, cfg)
	case limiter.GCRAMode:
		l.eng, err = build(l, gcraAlgo, cfg)
	case limiter.FixedWindowMode:
		l.max = cfg.Limit
		l.eng, err = build(l, fixedWindowAlgo, cfg)
	case limiter.SlidingCounterMode:
		l.max = cfg.Limit
		l.eng, err = build(l, slidingCounterAlgo, cfg)
	default:
		l.max = cfg.Limit
		l.eng, err = build(l, slidingLogAlgo, cfg)
	}
	if err != nil {
		return nil, err
	}
	st.set.Metrics.init(downstream)
	return l, nil
}

func build[S any](l *Limiter, mk func(limiter.Config) (algo[S], error), cfg limiter.Config) (engine, error) {
	a, err := mk(cfg)
	if err != nil {
		return nil, err
	}
	ex := &exact[S]{st: l.st, name: l.name, a: a, cache: map[string]cached[S]{}, seed: maphash.MakeSeed()}
	if !l.opts.Approximate {
		return ex, nil
	}
	return startApprox(ex), nil
}

// AllowAt decides whether key may spend cost units at now and, if so,
// spends them in the shared state. It blocks for the KV round trips, at
// most Settings.Timeout. The error is non-nil for an inadmissible cost
// (wrapping limiter.ErrInvalidCost or limiter.ErrCostTooLarge) and, when
// fail-closed, for a store failure (wrapping ErrUnavailable); a fail-open
// store failure admits.
func (l *Limiter) AllowAt(key string, now time.Time, cost int) (limiter.Decision, error) {
	t := now.UnixNano()
	if cost < 1 || cost > l.max {
		return limiter.Decision{}, l.eng.costErr(t, cost)
	}
	ctx, cancel := context.WithTimeout(l.st.ctx, l.st.set.Timeout)
	defer cancel()
	d, err := l.eng.allow(ctx, subject(l.name, key), t, cost)
	if err != nil {
		return l.failed(err)
	}
	return d, nil
}

// failed applies the fail-open / fail-closed policy to a store error.
func (l *Limiter) failed(err error) (limiter.Decision, error) {
	l.st.set.Metrics.storeError(l.name)
	if l.opts.FailClosed {
		return limiter.Decision{}, fmt.Errorf("%w: downstream %s: %w", ErrUnavailable, l.name, err)
	}
	l.st.warn("admission store unavailable; admitting (fail open)", l.name, err)
	return limiter.Decision{Allowed: true}, nil
}

// warn logs at most one store warning per 10 s.
func (st *Store) warn(msg, downstream string, err error) {
	now := time.Now().UnixNano()
	last := st.lastWarn.Load()
	if now-last < int64(10*time.Second) || !st.lastWarn.CompareAndSwap(last, now) {
		return
	}
	st.set.Logger.Warn(msg, "downstream", downstream, "bucket", st.set.Bucket, "error", err.Error())
}

// Sweep forgets cached states that are fresh at now and returns how many.
// The bucket forgets idle keys by itself (per-key TTL).
func (l *Limiter) Sweep(now time.Time) int { return l.eng.sweep(now.UnixNano()) }

// Close stops approximate mode's background sync (after a last one) and
// waits for it; decisions still work, in exact mode. Idempotent.
func (l *Limiter) Close() error {
	l.close.Do(l.eng.stop)
	return nil
}

// exact is the read, decide, compare-and-swap path.
type exact[S any] struct {
	st   *Store
	name string
	a    algo[S]
	seed maphash.Seed
	// locks serialize one instance's decisions on a key (by hash stripe),
	// so its own requests do not conflict with each other in the bucket.
	locks [64]sync.Mutex
	mu    sync.Mutex
	cache map[string]cached[S] // last state written, by KV key; guarded by mu
}

// cached is a key's state as of revision rev.
type cached[S any] struct {
	s   S
	rev uint64
}

func (e *exact[S]) costErr(now int64, cost int) error {
	_, _, err := e.a.decide(e.a.fresh(now), now, cost)
	if err == nil {
		err = limiter.ErrInvalidCost // unreachable: cost was out of range
	}
	return err
}

func (e *exact[S]) allow(ctx context.Context, k string, now int64, cost int) (limiter.Decision, error) {
	lk := &e.locks[maphash.String(e.seed, k)%uint64(len(e.locks))]
	lk.Lock()
	defer lk.Unlock()
	start := time.Now()
	defer func() { e.st.set.Metrics.observe(e.name, time.Since(start)) }()
	c, ok := e.get(k)
	var buf [32]byte
	for try := range e.st.set.MaxTries {
		if !ok {
			var err error
			if c, err = e.load(ctx, k, now); err != nil {
				e.del(k)
				return limiter.Decision{}, err
			}
			e.put(k, c) // later rejections are answered from it
		}
		// A rejection writes nothing: other instances only consume, so
		// the state just read (or cached) rejects at least as surely as
		// the bucket's current one.
		d, s2, err := e.a.decide(c.s, now, cost)
		if err != nil || !d.Allowed {
			return d, err
		}
		rev, conflict, err := e.st.write(ctx, k, c.rev, e.a.enc(buf[:0], s2), ttlFor(now, e.a.freshAt(s2, now)))
		switch {
		case err != nil:
			e.del(k)
			return limiter.Decision{}, err
		case !conflict:
			e.put(k, cached[S]{s: s2, rev: rev})
			return d, nil
		}
		e.st.set.Metrics.conflict(e.name)
		ok = false
		if err := backoff(ctx, try); err != nil {
			break
		}
	}
	e.del(k)
	return limiter.Decision{}, errConflicts
}

// backoff waits a random 0..100 µs × 2^try (at most 3.2 ms) before a
// compare-and-swap retry, so that writers that just collided spread out.
func backoff(ctx context.Context, try int) error {
	if try == 0 {
		return ctx.Err() // the first retry goes at once: the loser re-reads anyway
	}
	t := time.NewTimer(rand.N(100 * time.Microsecond << min(try, 5)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// load reads KV key k; an absent key, or a state another rule wrote, is
// fresh at now.
func (e *exact[S]) load(ctx context.Context, k string, now int64) (cached[S], error) {
	val, rev, err := e.st.read(ctx, k)
	if err != nil {
		return cached[S]{}, err
	}
	if val != nil {
		if s, ok := e.a.dec(val); ok {
			return cached[S]{s: s, rev: rev}, nil
		}
	}
	return cached[S]{s: e.a.fresh(now), rev: rev}, nil
}

func (e *exact[S]) get(k string) (cached[S], bool) {
	e.mu.Lock()
	c, ok := e.cache[k]
	e.mu.Unlock()
	return c, ok
}

// put caches c for k; at the cap it first drops an arbitrary entry (a
// dropped entry costs one read later, never a wrong decision).
func (e *exact[S]) put(k string, c cached[S]) {
	e.mu.Lock()
	if _, ok := e.cache[k]; !ok && len(e.cache) >= e.st.set.MaxKeys {
		for old := range e.cache {
			delete(e.cache, old)
			break
		}
	}
	e.cache[k] = c
	e.mu.Unlock()
}

func (e *exact[S]) del(k string) {
	e.mu.Lock()
	delete(e.cache, k)
	e.mu.Unlock()
}

func (e *exact[S]) sweep(now int64) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for k, c := range e.cache {
		if e.a.freshAt(c.s, now) <= now {
			delete(e.cache, k)
			n++
		}
	}
	return n
}

func (e *exact[S]) stop() {}
