package limiter

import (
	"fmt"
	"math"
	"time"
)

// FixedWindow is the fixed-window counter: at most Limit units in each window
// [k×Window, (k+1)×Window) of the timeline, so windows are aligned to the
// clock (a 1-minute window starts on the minute, a 1-day window at 00:00
// UTC). It is the cheapest rule and admits up to 2×Limit across a window
// boundary. FixedWindow is an immutable value, safe for concurrent use.
type FixedWindow struct {
	limit  int64
	window int64
}

// FixedWindowState is one key's count of units admitted in the window
// starting at Start (nanoseconds). The zero value is fresh. In every state
// the rule returns with a non-zero Count, Start is a multiple of Window, and
// Decide relies on it: a state built by hand with another Start is decided
// as if its windows began there, until a request two or more windows later
// realigns it.
type FixedWindowState struct {
	Start int64
	Count int64
}

// NewFixedWindow returns the rule for limit units (>= 1) per window (> 0).
func NewFixedWindow(limit int, window time.Duration) (FixedWindow, error) {
	if err := (Config{Mode: FixedWindowMode, Limit: limit, Window: window}).Validate(); err != nil {
		return FixedWindow{}, err
	}
	return FixedWindow{limit: int64(limit), window: int64(window)}, nil
}

// Fresh returns the state of a key never seen.
func (r FixedWindow) Fresh(now int64) FixedWindowState { return freshPure[FixedWindowState](r, now) }

// Decide admits or rejects cost units at now (nanoseconds) and returns the
// decision and the new state. It returns an error only for cost < 1
// (ErrInvalidCost) or cost > Limit (ErrCostTooLarge).
func (r FixedWindow) Decide(s FixedWindowState, now int64, cost int) (Decision, FixedWindowState, error) {
	return decidePure(r, s, now, cost)
}

// IsFresh reports whether s is indistinguishable from Fresh at now.
func (r FixedWindow) IsFresh(s FixedWindowState, now int64) bool { return r.isFresh(&s, now) }

func (r FixedWindow) init(s *FixedWindowState, now int64) { *s = FixedWindowState{} }
func (r FixedWindow) capacity() int                       { return int(r.limit) }
func (r FixedWindow) capacityName() string                { return "limit" }

// admitNear is decide for the common case, a request admitted in the
// state's window or the next, small enough to be inlined into the keyed
// table's decision, which calls decideGeneral only when ok is false (s is
// then untouched). Start is a multiple of Window, so the next window needs no
// division, and written as conditional moves no branch to mispredict: a key
// seen about once a window comes back in the next window about as often as
// in the same one.
func (r FixedWindow) admitNear(s *FixedWindowState, now int64, cost int) (d Decision, ok bool) {
	start, count := s.Start, s.Count
	if e := uint64(now - start); count != 0 && e < 2*uint64(r.window) {
		if e >= uint64(r.window) {
			start, count = start+r.window, 0
		}
		if count += int64(cost); count <= r.limit {
			s.Start, s.Count = start, count
			return Decision{Allowed: true, Remaining: int(r.limit - count)}, true
		}
	}
	return d, false
}

func (r FixedWindow) decide(s *FixedWindowState, now int64, cost int) Decision {
	if d, ok := r.admitNear(s, now, cost); ok {
		return d
	}
	return r.decideGeneral(s, now, cost)
}

// decideGeneral is decide without the admitNear shortcut.
func (r FixedWindow) decideGeneral(s *FixedWindowState, now int64, cost int) Decision {
	// A now inside the state's window (a key over its limit) needs no
	// division either.
	if e := uint64(now - s.Start); s.Count == 0 || e >= uint64(r.window) {
		s.Start, s.Count = r.roll(s, now)
	}
	if s.Count+int64(cost) <= r.limit {
		s.Count += int64(cost)
		return Decision{Allowed: true, Remaining: int(r.limit - s.Count)}
	}
	return Decision{Remaining: int(r.limit - s.Count), RetryAfter: time.Duration(s.Start + r.window - now)}
}

// roll returns the window start and count for now: a now in an earlier
// window than the state's (time going backwards) counts against the state's
// window, never resetting it early.
func (r FixedWindow) roll(s *FixedWindowState, now int64) (start, count int64) {
	if start := floorDiv(now, r.window) * r.window; start > s.Start || s.Count == 0 {
		return start, 0
	}
	return s.Start, s.Count
}

func (r FixedWindow) isFresh(s *FixedWindowState, now int64) bool {
	return s.Count == 0 || now >= s.Start+r.window
}

func (r FixedWindow) freshAt(s *FixedWindowState) int64 {
	if s.Count == 0 {
		return math.MinInt64
	}
	return s.Start + r.window
}

func (r FixedWindow) String() string {
	return fmt.Sprintf("fixed_window(limit=%d, window=%s)", r.limit, time.Duration(r.window))
}
