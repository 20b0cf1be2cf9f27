package shaper

import (
	"math"
	"time"
)

// catchUp is how much schedule a late scheduler may make up: when it wakes
// after a lane's slot, it starts the lane's jobs for slots no older than
// now-catchUp, so a late wake-up adds at most about 20 ms of starts
// (docs/guarantees.md). Idle time is never made up: a lane that could not
// start (empty, paused, at its concurrency cap) restarts its schedule from
// the moment it could.
const catchUp = 20 * time.Millisecond

// schedule is a lane's absolute schedule of starts: each start takes slot
// s = max(next, the job's ready time, the policies' NotBefore), then next =
// s + cost × 1/rate. Its methods are the only code that writes its fields.
// The zero value has no rate (setRate first). Guarded by lane.mu.
type schedule struct {
	rate     float64       // effective drain rate, starts per second
	interval time.Duration // 1/rate
	next     time.Time     // earliest next start; zero before the first
	last     time.Time     // slot of the last start; zero before the first
	lastCost int           // cost of the last start: it holds lastCost intervals
}

// setRate makes rate the drain rate; it applies to queued jobs: the next
// start is the last start plus its cost at the new interval.
func (s *schedule) setRate(rate float64) {
	s.rate, s.interval = rate, interval(rate)
	if !s.last.IsZero() {
		s.next = s.last.Add(s.drainOf(s.lastCost))
	}
}

// start books a start of cost at slot.
func (s *schedule) start(slot time.Time, cost int) {
	s.lastCost = cost
	s.last, s.next = slot, slot.Add(s.drainOf(cost))
}

// restartFrom restarts the schedule no earlier than t, after the lane
// could not start (idle, paused, at its concurrency cap, held): no
// catch-up burst for the time it could not.
func (s *schedule) restartFrom(t time.Time) {
	s.next = later(s.next, t)
}

// slotFor is the slot of a job ready at readyAt when the policies allow no
// start before notBefore.
func (s *schedule) slotFor(readyAt, notBefore time.Time) time.Time {
	return later(later(s.next, readyAt), notBefore)
}

// drainOf is the drain time of cost slots at the current rate.
func (s *schedule) drainOf(cost int) time.Duration {
	return time.Duration(max(cost, 1)) * s.interval
}

// held is what the last start still holds of the bucket at now: n slots of
// its drain intervals not yet over, the first freed after first.
func (s *schedule) held(now time.Time) (n int, first time.Duration) {
	if s.last.IsZero() {
		return 0, 0
	}
	r := s.last.Add(s.drainOf(s.lastCost)).Sub(now)
	if r <= 0 {
		return 0, 0
	}
	n = int((r + s.interval - 1) / s.interval)
	return n, r - time.Duration(n-1)*s.interval
}

// interval is the spacing of starts at rate per second, rounded to the
// nanosecond (the rounding error is below 1e-9 relative at every valid rate).
func interval(rate float64) time.Duration {
	return time.Duration(math.Round(float64(time.Second) / rate))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
