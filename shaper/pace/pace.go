// Package pace is a lane's absolute schedule of starts: the arithmetic of
// the leaky bucket's drain. Each start takes slot s = max(next, the job's
// ready time, the policies' NotBefore), then next = s + cost × 1/rate.
// Time is an argument everywhere; nothing here reads the clock.
package pace

import (
	"math"
	"time"
)

// CatchUp is how much schedule a late scheduler may make up: when it wakes
// after a lane's slot, it starts the lane's jobs for slots no older than
// now-CatchUp, so a late wake-up adds at most about 20 ms of starts
// (docs/guarantees.md). Idle time is never made up: a lane that could not
// start (empty, paused, at its concurrency cap) restarts its schedule from
// the moment it could.
const CatchUp = 20 * time.Millisecond

// Schedule is one lane's schedule. Its methods are the only code that
// writes its fields. The zero value has no rate (SetRate first). It is
// not safe for concurrent use: the lane guards it with its lock.
type Schedule struct {
	rate     float64       // effective drain rate, starts per second
	interval time.Duration // 1/rate
	next     time.Time     // earliest next start; zero before the first
	last     time.Time     // slot of the last start; zero before the first
	lastCost int           // cost of the last start: it holds lastCost intervals
}

// Rate is the drain rate in starts per second.
func (s *Schedule) Rate() float64 { return s.rate }

// Interval is the spacing of starts at the drain rate.
func (s *Schedule) Interval() time.Duration { return s.interval }

// Next is the earliest next start; zero before the first.
func (s *Schedule) Next() time.Time { return s.next }

// Last is the slot of the last start; zero before the first.
func (s *Schedule) Last() time.Time { return s.last }

// SetRate makes rate the drain rate; it applies to queued jobs: the next
// start is the last start plus its cost at the new interval.
func (s *Schedule) SetRate(rate float64) {
	s.rate, s.interval = rate, IntervalOf(rate)
	if !s.last.IsZero() {
		s.next = s.last.Add(s.DrainOf(s.lastCost))
	}
}

// Start books a start of cost at slot.
func (s *Schedule) Start(slot time.Time, cost int) {
	s.lastCost = cost
	s.last, s.next = slot, slot.Add(s.DrainOf(cost))
}

// RestartFrom restarts the schedule no earlier than t, after the lane
// could not start (idle, paused, at its concurrency cap, held): no
// catch-up burst for the time it could not.
func (s *Schedule) RestartFrom(t time.Time) {
	if t.After(s.next) {
		s.next = t
	}
}

// SlotFor is the slot of a job ready at readyAt when the policies allow no
// start before notBefore.
func (s *Schedule) SlotFor(readyAt, notBefore time.Time) time.Time {
	slot := s.next
	for _, t := range [2]time.Time{readyAt, notBefore} {
		if t.After(slot) {
			slot = t
		}
	}
	return slot
}

// DrainOf is the drain time of cost slots at the current rate.
func (s *Schedule) DrainOf(cost int) time.Duration {
	return time.Duration(max(cost, 1)) * s.interval
}

// Held is what the last start still holds of the bucket at now: n slots of
// its drain intervals not yet over, the first freed after first.
func (s *Schedule) Held(now time.Time) (n int, first time.Duration) {
	if s.last.IsZero() {
		return 0, 0
	}
	r := s.last.Add(s.DrainOf(s.lastCost)).Sub(now)
	if r <= 0 {
		return 0, 0
	}
	n = int((r + s.interval - 1) / s.interval)
	return n, r - time.Duration(n-1)*s.interval
}

// IntervalOf is the spacing of starts at rate per second, rounded to the
// nanosecond (the rounding error is below 1e-9 relative at every valid
// rate).
func IntervalOf(rate float64) time.Duration {
	return time.Duration(math.Round(float64(time.Second) / rate))
}
