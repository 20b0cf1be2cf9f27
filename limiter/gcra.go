package limiter

import (
	"fmt"
	"math"
	"time"
)

// GCRA is the generic cell-rate algorithm, the leaky bucket used as a meter:
// each admitted unit pushes a theoretical arrival time (TAT) one emission
// interval (1/Rate) further, and a request is admitted if the TAT it would
// set is at most Burst intervals ahead of now. It admits exactly what a
// TokenBucket with the same Rate and Burst admits, with one int64 of state.
//
// The emission interval is 1/Rate rounded to the nearest nanosecond (as
// throttled does with its time.Duration period), so where 1e9/Rate is not an
// integer the long-run rate differs from Rate by less than 0.5 ns per
// interval. GCRA is an immutable value, safe for concurrent use.
type GCRA struct {
	interval int64 // emission interval, ns per unit
	tau      int64 // Burst × interval
	burst    int
}

// GCRAState is one key's theoretical arrival time, in nanoseconds on the
// caller's timeline. A TAT at or before now means a full bucket; the zero
// value is fresh.
type GCRAState struct {
	TAT int64
}

// NewGCRA returns the rule for rate units per second (> 0) with a burst of
// burst units (>= 1).
func NewGCRA(rate float64, burst int) (GCRA, error) {
	if err := (Config{Mode: GCRAMode, Rate: rate, Burst: burst}).Validate(); err != nil {
		return GCRA{}, err
	}
	t := emissionInterval(rate)
	return GCRA{interval: t, tau: t * int64(burst), burst: burst}, nil
}

func emissionInterval(rate float64) int64 {
	return max(1, int64(math.Round(1e9/rate)))
}

// Interval returns the emission interval, 1/Rate rounded to a nanosecond.
func (r GCRA) Interval() time.Duration { return time.Duration(r.interval) }

// Burst returns the burst in units.
func (r GCRA) Burst() int { return r.burst }

// Fresh returns the state of a key never seen.
func (r GCRA) Fresh(now int64) GCRAState { return freshPure[GCRAState](r, now) }

// Decide admits or rejects cost units at now (nanoseconds) and returns the
// decision and the new state. It returns an error only for cost < 1
// (ErrInvalidCost) or cost > Burst (ErrCostTooLarge).
func (r GCRA) Decide(s GCRAState, now int64, cost int) (Decision, GCRAState, error) {
	return decidePure(r, s, now, cost)
}

// IsFresh reports whether s is indistinguishable from Fresh at now.
func (r GCRA) IsFresh(s GCRAState, now int64) bool { return r.isFresh(&s, now) }

func (r GCRA) init(s *GCRAState, now int64) { s.TAT = now }
func (r GCRA) capacity() int                { return r.burst }
func (r GCRA) capacityName() string         { return "burst" }

func (r GCRA) decide(s *GCRAState, now int64, cost int) Decision {
	tat := max(s.TAT, now)
	next := tat + int64(cost)*r.interval
	if next-now <= r.tau {
		s.TAT = next
		return Decision{Allowed: true, Remaining: int((r.tau - (next - now)) / r.interval)}
	}
	return Decision{
		Remaining:  int((r.tau - (tat - now)) / r.interval),
		RetryAfter: time.Duration(next - r.tau - now),
	}
}

func (r GCRA) isFresh(s *GCRAState, now int64) bool { return s.TAT <= now }
func (r GCRA) freshAt(s *GCRAState) int64           { return s.TAT }

func (r GCRA) String() string {
	return fmt.Sprintf("gcra(interval=%s, burst=%d)", time.Duration(r.interval), r.burst)
}
