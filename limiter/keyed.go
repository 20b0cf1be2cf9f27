package limiter

import (
	"hash/maphash"
	"time"
	"unsafe"
)

// Keyed is a set of limiters of one Config, one per key (tenant, API key,
// client address), for any Mode. It is safe for concurrent use: keys are
// spread over up to 64 shards by a seeded hash, and a decision holds its
// key's shard's mutex, so decisions on keys of different shards do not wait
// for each other (see table.go). Create one with NewKeyed; the zero Keyed is
// not usable.
//
// A key is never stored: each key is reduced to a 64-bit hash/maphash hash,
// with a seed drawn at random for this Keyed, so which keys collide differs
// between Keyed limiters and processes and cannot be worked out from
// outside the process. Only that hash and the algorithm's state are kept,
// inline in an open-addressing table: no key strings, no per-key allocation
// (except SlidingLog's log growing), no allocation per decision for a known
// key. Two keys whose hashes collide would share one limit; among a million
// live keys that happens with probability about 3e-8.
//
// Memory follows active keys: a key whose state is indistinguishable from a
// new key's (full bucket, empty windows) is forgotten by Sweep, and also,
// shard by shard, whenever a shard would otherwise grow its table; so even
// without Sweep the table grows only for keys that are live at once. (Len
// counts stored keys, which may include fresh ones not yet swept.)
// Forgetting takes the instant passed to Sweep (or to the decision that
// swept) as the present: a request stamped earlier that arrives afterwards
// finds its key new, where the kept state could still have counted what
// was spent before that instant. Pass Sweep instants from the same clock as
// the decisions'; the two then differ by the time between reading the clock
// and deciding, and so does the effect (at most that span's refill, or a
// window boundary falling inside it).
//
// Config.MaxKeys caps the stored keys. A new key that finds its shard full
// first makes the shard forget its fresh keys (at most once per cap/8 such
// inserts); if none is fresh, it replaces an existing key: of 16 sampled
// keys, the one whose state would become fresh soonest ("evict the
// stalest"). We evict rather than refuse because refusing would let a flood
// of distinct keys lock every new tenant out, while evicting costs only
// precision: the evicted key is forgiven the debt it still had (at most one
// extra burst or window's worth), and the stalest has the least debt. Cap
// hits and evictions of live state are counted in Stats. The cap is split
// evenly over the shards, so eviction may begin a few percent before Len
// reaches MaxKeys when keys hash unevenly; Len never exceeds MaxKeys.
//
// The package starts no goroutines: call Sweep periodically (for example
// every Window, or every Burst/Rate) to return idle keys' memory promptly.
type Keyed struct {
	seed  maphash.Seed
	clock clock
	max   int   // largest admissible cost
	kind  uint8 // which of the tables below is in use
	// The table, typed for the hot path: exactly one is non-nil. AllowAt
	// switches on kind and calls a non-generic decide per rule, because a
	// method called through an interface or through a generic dictionary
	// is an indirect call that cannot be inlined.
	tb   *keyedTable[TokenBucketState, TokenBucket]
	gcra *keyedTable[GCRAState, GCRA]
	fw   *keyedTable[FixedWindowState, FixedWindow]
	sc   *keyedTable[SlidingCounterState, SlidingCounter]
	sl   *keyedTable[SlidingLogState, SlidingLog]
	impl keyedImpl // the same table, for the cold paths (Sweep, Stats)
	what string
	cfg  Config
}

// Rule kinds, for AllowAt's switch (cheaper than comparing Mode strings).
const (
	kindTokenBucket uint8 = iota
	kindGCRA
	kindFixedWindow
	kindSlidingCounter
	kindSlidingLog
)

// Stats are a Keyed limiter's counters since it was created.
type Stats struct {
	Keys      int    // live keys now, as Len
	CapHits   uint64 // new keys that found their shard at its cap and replaced a key
	Evictions uint64 // of CapHits, replaced keys whose state was still live (not fresh)
	Forgotten uint64 // keys dropped because their state had become fresh (Sweep, per-decision sweeping, or at the cap)
}

// keyedImpl is the per-state-type half of Keyed.
type keyedImpl interface {
	sweep(now int64) int
	stats() Stats
	slotBytes() int
}

type keyedTable[S any, R rule[S]] struct {
	rule   R
	shift  uint // 64 - log2(len(shards)); a shift of 64 yields shard 0
	shards []shard[S, R]
}

// NewKeyed validates cfg and returns an empty keyed limiter. Errors name the
// bad field and its valid range and wrap ErrInvalidConfig.
func NewKeyed(cfg Config) (*Keyed, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxKeys == 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	k := &Keyed{cfg: cfg, seed: maphash.MakeSeed()}
	switch cfg.Mode {
	case TokenBucketMode:
		r, _ := NewTokenBucket(cfg.Rate, cfg.Burst)
		k.tb = newKeyedTable[TokenBucketState](r, cfg.MaxKeys)
		k.impl, k.max, k.what, k.kind = k.tb, r.capacity(), r.capacityName(), kindTokenBucket
	case GCRAMode:
		r, _ := NewGCRA(cfg.Rate, cfg.Burst)
		k.gcra = newKeyedTable[GCRAState](r, cfg.MaxKeys)
		k.impl, k.max, k.what, k.kind = k.gcra, r.capacity(), r.capacityName(), kindGCRA
	case FixedWindowMode:
		r, _ := NewFixedWindow(cfg.Limit, cfg.Window)
		k.fw = newKeyedTable[FixedWindowState](r, cfg.MaxKeys)
		k.impl, k.max, k.what, k.kind = k.fw, r.capacity(), r.capacityName(), kindFixedWindow
	case SlidingCounterMode:
		r, _ := NewSlidingCounter(cfg.Limit, cfg.Window)
		k.sc = newKeyedTable[SlidingCounterState](r, cfg.MaxKeys)
		k.impl, k.max, k.what, k.kind = k.sc, r.capacity(), r.capacityName(), kindSlidingCounter
	case SlidingLogMode:
		r, _ := NewSlidingLog(cfg.Limit, cfg.Window)
		k.sl = newKeyedTable[SlidingLogState](r, cfg.MaxKeys)
		k.impl, k.max, k.what, k.kind = k.sl, r.capacity(), r.capacityName(), kindSlidingLog
	}
	return k, nil
}

// shardsFor picks a power-of-two shard count: 64, or fewer so that each shard
// holds at least 1024 keys (one shard below 2048, making small caps exact).
func shardsFor(maxKeys int) int {
	n := 1
	for n < 64 && maxKeys/(n*2) >= 1024 {
		n *= 2
	}
	return n
}

func newKeyedTable[S any, R rule[S]](r R, maxKeys int) *keyedTable[S, R] {
	n := shardsFor(maxKeys)
	t := &keyedTable[S, R]{rule: r, shift: 64, shards: make([]shard[S, R], n)}
	for 1<<(64-t.shift) < n {
		t.shift--
	}
	for i := range t.shards {
		t.shards[i].cap = maxKeys / n
		if i < maxKeys%n {
			t.shards[i].cap++
		}
		t.shards[i].resize(minTableLen) // find needs a non-empty table
	}
	return t
}

// Config returns the configuration, with MaxKeys defaulted.
func (k *Keyed) Config() Config { return k.cfg }

// AllowAt decides whether key may spend cost units at now and, if so,
// spends them. Take now once per request and pass it to every limiter the
// request meets. The error is non-nil only for cost < 1
// (ErrInvalidCost) or a cost above the burst or limit, which can never be
// admitted (ErrCostTooLarge, with the numbers); the Decision is then zero.
func (k *Keyed) AllowAt(key string, now time.Time, cost int) (Decision, error) {
	if cost < 1 || cost > k.max {
		return Decision{}, checkCost(cost, k.max, k.what)
	}
	h := k.hash(key)
	t := k.clock.ns(now)
	switch k.kind {
	case kindTokenBucket:
		return decideTokenBucket(k.tb, h, t, cost), nil
	case kindGCRA:
		return decideGCRA(k.gcra, h, t, cost), nil
	case kindFixedWindow:
		return decideFixedWindow(k.fw, h, t, cost), nil
	case kindSlidingCounter:
		return decideSlidingCounter(k.sc, h, t, cost), nil
	default:
		return decideSlidingLog(k.sl, h, t, cost), nil
	}
}

// The decide functions are written out once per rule, so that the rule's
// decide is a direct call the compiler can inline (through the generic
// shard it would be an indirect call): GCRA's decide and the common cases
// of the token bucket (admitFull) and the fixed window (admitNear) are
// inlined. Each holds the key's shard's mutex for the lookup and the
// decision; shard.state finds or inserts the key.

func decideTokenBucket(t *keyedTable[TokenBucketState, TokenBucket], h uint64, now int64, cost int) Decision {
	sh := t.shard(h)
	sh.mu.Lock()
	s := sh.state(t.rule, h, now)
	d, ok := t.rule.admitFull(s, now, cost) // decide, split so that its common case is inlined
	if !ok {
		d = t.rule.decideGeneral(s, now, cost)
	}
	sh.mu.Unlock()
	return d
}

func decideGCRA(t *keyedTable[GCRAState, GCRA], h uint64, now int64, cost int) Decision {
	sh := t.shard(h)
	sh.mu.Lock()
	d := t.rule.decide(sh.state(t.rule, h, now), now, cost)
	sh.mu.Unlock()
	return d
}

func decideFixedWindow(t *keyedTable[FixedWindowState, FixedWindow], h uint64, now int64, cost int) Decision {
	sh := t.shard(h)
	sh.mu.Lock()
	s := sh.state(t.rule, h, now)
	d, ok := t.rule.admitNear(s, now, cost) // decide, split so that its common case is inlined
	if !ok {
		d = t.rule.decideGeneral(s, now, cost)
	}
	sh.mu.Unlock()
	return d
}

func decideSlidingCounter(t *keyedTable[SlidingCounterState, SlidingCounter], h uint64, now int64, cost int) Decision {
	sh := t.shard(h)
	sh.mu.Lock()
	d := t.rule.decide(sh.state(t.rule, h, now), now, cost)
	sh.mu.Unlock()
	return d
}

func decideSlidingLog(t *keyedTable[SlidingLogState, SlidingLog], h uint64, now int64, cost int) Decision {
	sh := t.shard(h)
	sh.mu.Lock()
	d := t.rule.decide(sh.state(t.rule, h, now), now, cost)
	sh.mu.Unlock()
	return d
}

// hash returns key's stored hash.
func (k *Keyed) hash(key string) uint64 { return keyHash(maphash.String(k.seed, key)) }

// Allow is AllowAt(key, time.Now(), 1).
func (k *Keyed) Allow(key string) bool {
	d, _ := k.AllowAt(key, time.Now(), 1)
	return d.Allowed
}

// Sweep forgets every key whose state at now is indistinguishable from a new
// key's and returns how many it forgot. It locks one shard at a time, for a
// scan of that shard's table; decisions on other shards proceed.
func (k *Keyed) Sweep(now time.Time) int { return k.impl.sweep(k.clock.ns(now)) }

// Len returns the number of keys with stored state.
func (k *Keyed) Len() int { return k.impl.stats().Keys }

// Stats returns the counters; see Stats.
func (k *Keyed) Stats() Stats { return k.impl.stats() }

// StateBytesPerKey returns the fixed bytes one live key occupies in the
// table: its slot, the key's 8-byte hash and the algorithm's state (16
// bytes in all for GCRA, 24 for token bucket and both window counters, 40
// for the sliding log's ring header), plus for the sliding log a full ring
// of Limit 8-byte timestamps. It does not count table slack: at 53–80 %
// load a slot costs 1.25–1.9× its size, which the heap figures in the
// benchmark notes include.
func (k *Keyed) StateBytesPerKey() int {
	b := k.impl.slotBytes()
	if k.cfg.Mode == SlidingLogMode {
		b += 8 * k.cfg.Limit
	}
	return b
}

// shard returns the shard of hash h.
func (t *keyedTable[S, R]) shard(h uint64) *shard[S, R] { return &t.shards[h>>t.shift] }

func (t *keyedTable[S, R]) sweep(now int64) int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		n += sh.sweep(t.rule, now, true)
		sh.mu.Unlock()
	}
	return n
}

func (t *keyedTable[S, R]) stats() Stats {
	var st Stats
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		st.Keys += sh.n
		st.CapHits += sh.capHits
		st.Evictions += sh.evictions
		st.Forgotten += sh.forgotten
		sh.mu.Unlock()
	}
	return st
}

func (t *keyedTable[S, R]) slotBytes() int { return int(unsafe.Sizeof(slot[S]{})) }
