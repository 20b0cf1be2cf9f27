package limiter

import "time"

// Refunds give back what an admitted request was charged, for a caller
// that asks several limits about one request and must undo the charges of
// those that admitted when a later one rejects. A refund at the instant of
// its charge, on the same key, with the same cost, leaves the state
// observationally as if the request had never been asked: every later
// decision is the same (property_test.go, TestRefundUndoesCharge). Refunds
// live apart from the decision path; nothing here is called by AllowAt.
//
// Per rule:
//   - TokenBucket: cost tokens go back, capped at Burst. Exact in real
//     arithmetic; in float64 (x/time/rate's arithmetic) the refill is then
//     computed in two steps instead of one, so later decisions have the
//     same Allowed, but Remaining may be off by 1 and RetryAfter by 1 ns
//     while the count lies within rounding of a whole number (0.9 % of
//     later decisions on the property test's traces).
//   - GCRA: the TAT moves back cost emission intervals, not before now.
//   - FixedWindow: the count of the state's window drops by cost (not below
//     0) if now lies in that window (or before it); in a later window the
//     charge has expired and there is nothing to give back.
//   - SlidingCounter: likewise for the current window's count.
//   - SlidingLog: the newest cost entries still counted at now are removed
//     (those the charge appended, when nothing was logged since).
//
// A refund long after its charge, or after other charges of the same key,
// still gives back at most cost units, but from the newest state, which
// may not be the charge's.

// refundRule is a rule that can give a charge back.
type refundRule[S any] interface {
	rule[S]
	// refund gives back cost units charged at or before now; cost is in
	// 1..capacity().
	refund(s *S, now int64, cost int)
}

// Refund gives key back cost units that AllowAt admitted at (or shortly
// before) now, as described above. A key with no stored state (never seen,
// or forgotten since) has nothing to give back. A cost below 1 is ignored;
// one above the burst or limit gives back the burst or limit. Refund is
// safe for concurrent use and does not allocate.
func (k *Keyed) Refund(key string, now time.Time, cost int) {
	if cost < 1 {
		return
	}
	cost = min(cost, k.max)
	h := k.hash(key)
	t := k.clock.ns(now)
	switch k.kind {
	case kindTokenBucket:
		refundKeyed(k.tb, h, t, cost)
	case kindGCRA:
		refundKeyed(k.gcra, h, t, cost)
	case kindFixedWindow:
		refundKeyed(k.fw, h, t, cost)
	case kindSlidingCounter:
		refundKeyed(k.sc, h, t, cost)
	default:
		refundKeyed(k.sl, h, t, cost)
	}
}

// refundKeyed refunds hash h's state, if stored. The generic call is fine
// here: refunds are off the hot path.
func refundKeyed[S any, R refundRule[S]](t *keyedTable[S, R], h uint64, now int64, cost int) {
	sh := t.shard(h)
	sh.mu.Lock()
	if s := sh.stored(h); s != nil {
		t.rule.refund(s, now, cost)
	}
	sh.mu.Unlock()
}

// refundPure implements the exported value-in, value-out Refund methods.
func refundPure[S any, R refundRule[S]](r R, s S, now int64, cost int) S {
	if cost >= 1 {
		r.refund(&s, now, min(cost, r.capacity()))
	}
	return s
}

// Refund returns s with cost tokens given back at now (see Keyed.Refund).
func (r TokenBucket) Refund(s TokenBucketState, now int64, cost int) TokenBucketState {
	return refundPure(r, s, now, cost)
}

func (r TokenBucket) refund(s *TokenBucketState, now int64, cost int) {
	// No refill is applied: the tokens stay as of s.Last, which the charge
	// set to its instant, so later refills are computed as they would have
	// been. The cap only matters for a refund without a charge.
	s.Tokens = min(s.Tokens+float64(cost), float64(r.burst))
}

// Refund returns s with cost units given back at now (see Keyed.Refund).
func (r GCRA) Refund(s GCRAState, now int64, cost int) GCRAState {
	return refundPure(r, s, now, cost)
}

func (r GCRA) refund(s *GCRAState, now int64, cost int) {
	// A TAT at or before now is a full bucket; never move it further back,
	// which would bank credit beyond the burst.
	if s.TAT > now {
		s.TAT = max(s.TAT-int64(cost)*r.interval, now)
	}
}

// Refund returns s with cost units given back at now (see Keyed.Refund).
func (r FixedWindow) Refund(s FixedWindowState, now int64, cost int) FixedWindowState {
	return refundPure(r, s, now, cost)
}

func (r FixedWindow) refund(s *FixedWindowState, now int64, cost int) {
	// decide charges a now before the state's window to that window, so
	// such a refund belongs to it too.
	if now < s.Start+r.window {
		s.Count = max(s.Count-int64(cost), 0)
	}
}

// Refund returns s with cost units given back at now (see Keyed.Refund).
func (r SlidingCounter) Refund(s SlidingCounterState, now int64, cost int) SlidingCounterState {
	return refundPure(r, s, now, cost)
}

func (r SlidingCounter) refund(s *SlidingCounterState, now int64, cost int) {
	if now < s.Start+r.window {
		s.Curr = int32(max(int64(s.Curr)-int64(cost), 0))
	}
}

// Refund returns s with cost units given back at now (see Keyed.Refund).
// Like Decide, it reuses the ring of s.
func (r SlidingLog) Refund(s SlidingLogState, now int64, cost int) SlidingLogState {
	return refundPure(r, s, now, cost)
}

func (r SlidingLog) refund(s *SlidingLogState, now int64, cost int) {
	// Entries are sorted: the newest are at the tail. Stop at the first
	// one no longer counted at now.
	for ; cost > 0 && s.n > 0 && s.at(int(s.n)-1) > now-r.window; cost-- {
		s.n--
	}
	if s.n == 0 {
		s.head = 0
	}
}
