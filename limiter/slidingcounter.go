package limiter

import (
	"fmt"
	"math"
	"math/bits"
	"time"
)

// SlidingCounter is the sliding-window counter (Cloudflare's): two
// clock-aligned fixed windows, the previous one weighted by the share of it
// the sliding window still overlaps. At elapsed e into the current window,
// the estimate is Prev×(Window−e)/Window + Curr, and cost n is admitted if
// estimate + n <= Limit. The arithmetic is exact (128-bit integers over
// nanoseconds), so RetryAfter is exact to the nanosecond.
//
// With 84 in the previous minute and 36 so far, 15 s into this one, the
// estimate is 84×45/60 + 36 = 99: one more is admitted, the next is not.
// SlidingCounter is an immutable value, safe for concurrent use.
type SlidingCounter struct {
	limit  int64
	window int64
}

// SlidingCounterState is one key's counts: Curr units admitted in the window
// starting at Start (nanoseconds) and Prev in the window before it. The zero
// value is fresh. In every state the rule returns with a non-zero count,
// Start is a multiple of Window, and Decide relies on it: a state built by
// hand with another Start is decided as if its windows began there, until
// a request two or more windows later realigns it.
type SlidingCounterState struct {
	Start      int64
	Prev, Curr int32
}

// NewSlidingCounter returns the rule for limit units (>= 1) per window (> 0).
func NewSlidingCounter(limit int, window time.Duration) (SlidingCounter, error) {
	if err := (Config{Mode: SlidingCounterMode, Limit: limit, Window: window}).Validate(); err != nil {
		return SlidingCounter{}, err
	}
	return SlidingCounter{limit: int64(limit), window: int64(window)}, nil
}

// Fresh returns the state of a key never seen.
func (r SlidingCounter) Fresh(now int64) SlidingCounterState {
	return freshPure[SlidingCounterState](r, now)
}

// Decide admits or rejects cost units at now (nanoseconds) and returns the
// decision and the new state. It returns an error only for cost < 1
// (ErrInvalidCost) or cost > Limit (ErrCostTooLarge).
func (r SlidingCounter) Decide(s SlidingCounterState, now int64, cost int) (Decision, SlidingCounterState, error) {
	return decidePure(r, s, now, cost)
}

// IsFresh reports whether s is indistinguishable from Fresh at now.
func (r SlidingCounter) IsFresh(s SlidingCounterState, now int64) bool { return r.isFresh(&s, now) }

func (r SlidingCounter) init(s *SlidingCounterState, now int64) { *s = SlidingCounterState{} }
func (r SlidingCounter) capacity() int                          { return int(r.limit) }
func (r SlidingCounter) capacityName() string                   { return "limit" }

// roll moves s to the window holding now and returns now clamped to it (a now
// before the state's window counts as the window's first instant). decide
// handles the common cases, the state's window and the next, itself.
func (r SlidingCounter) roll(s *SlidingCounterState, now int64) int64 {
	start := floorDiv(now, r.window) * r.window
	switch {
	case s.Prev == 0 && s.Curr == 0: // fresh: any window, earlier ones too
	case start < s.Start:
		return s.Start
	case start == s.Start:
	case start == s.Start+r.window:
		s.Prev, s.Curr = s.Curr, 0
	default:
		s.Prev, s.Curr = 0, 0
	}
	s.Start = start
	return now
}

// mulDiv returns floor(a×b/c) and whether it is exact; it requires a×b < c×2^64.
func mulDiv(a, b, c uint64) (q uint64, exact bool) {
	hi, lo := bits.Mul64(a, b)
	q, rem := bits.Div64(hi, lo, c)
	return q, rem == 0
}

// weightedPrev returns ceil(Prev×(Window−e)/Window): the previous window's
// units still counted at elapsed e.
func (r SlidingCounter) weightedPrev(prev int64, e int64) int64 {
	// No branches: whether prev is 0 and whether the quotient is exact are
	// both coin flips for a key seen about once a window, and a
	// mispredicted branch costs more than the division it would skip.
	q, exact := mulDiv(uint64(prev), uint64(r.window-e), uint64(r.window))
	if !exact {
		q++
	}
	return int64(q)
}

func (r SlidingCounter) decide(s *SlidingCounterState, now int64, cost int) Decision {
	// Start is a multiple of Window: a now in the state's window or the
	// next needs no division, and written as conditional moves no branch
	// to mispredict (a key seen about once a window comes back in the next
	// window about as often as in the same one). roll does the rest.
	t := now
	if d := uint64(now - s.Start); s.Prev|s.Curr != 0 && d < 2*uint64(r.window) {
		start, prev, curr := s.Start, s.Prev, s.Curr
		if d >= uint64(r.window) {
			start, prev, curr = start+r.window, curr, 0
		}
		s.Start, s.Prev, s.Curr = start, prev, curr
	} else {
		t = r.roll(s, now)
	}
	e := t - s.Start
	p, c, n, w := int64(s.Prev), int64(s.Curr), int64(cost), r.window
	// Admit iff p×(w−e) + (c+n)×w <= limit×w, i.e. p×(w−e) <= (limit−c−n)×w.
	if room := r.limit - c - n; room >= 0 {
		hi1, lo1 := bits.Mul64(uint64(p), uint64(w-e))
		hi2, lo2 := bits.Mul64(uint64(room), uint64(w))
		if hi1 < hi2 || (hi1 == hi2 && lo1 <= lo2) {
			s.Curr += int32(cost)
			return Decision{Allowed: true, Remaining: int(max(0, room-r.weightedPrev(p, e)))}
		}
		// Within this window, at the first e' with p×(w−e') <= room×w;
		// room < p here, so the quotient is below w.
		q, _ := mulDiv(uint64(room), uint64(w), uint64(p))
		return Decision{
			Remaining:  int(max(0, r.limit-c-r.weightedPrev(p, e))),
			RetryAfter: time.Duration(s.Start + w - int64(q) - now),
		}
	}
	// Not in this window: in the next, Curr becomes the previous count and
	// cost fits at the first e' with c×(w−e') <= (limit−n)×w.
	var wait int64
	if room := r.limit - n; room < c {
		q, _ := mulDiv(uint64(room), uint64(w), uint64(c))
		wait = w - int64(q)
	}
	return Decision{
		Remaining:  int(max(0, r.limit-c-r.weightedPrev(p, e))),
		RetryAfter: time.Duration(s.Start + w + wait - now),
	}
}

func (r SlidingCounter) isFresh(s *SlidingCounterState, now int64) bool {
	return now >= r.freshAt(s)
}

func (r SlidingCounter) freshAt(s *SlidingCounterState) int64 {
	switch {
	case s.Curr > 0:
		return s.Start + 2*r.window
	case s.Prev > 0:
		return s.Start + r.window
	default:
		return math.MinInt64
	}
}

func (r SlidingCounter) String() string {
	return fmt.Sprintf("sliding_counter(limit=%d, window=%s)", r.limit, time.Duration(r.window))
}
