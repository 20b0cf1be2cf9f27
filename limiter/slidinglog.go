package limiter

import (
	"fmt"
	"time"
)

// SlidingLog is the exact sliding window: it keeps the instant of every
// admitted unit and admits cost n at now if the units admitted in
// (now−Window, now] plus n stay within Limit. A unit admitted at t counts
// during [t, t+Window), so no half-open span of length Window ever holds more
// than Limit units. Its state grows with the limit: up to Limit timestamps of
// 8 bytes per key. SlidingLog is an immutable value, safe for concurrent use.
type SlidingLog struct {
	limit  int
	window int64
}

// SlidingLogState is one key's log: a ring of admission instants, oldest
// first, that grows on demand up to Limit entries. The zero value is fresh.
// Decide reuses the ring in place, like append: after
// s2 := r.Decide(s, ...), use s2 and not s.
type SlidingLogState struct {
	buf  []int64
	head int32
	n    int32
}

// NewSlidingLog returns the rule for limit units (1..MaxLogLimit) per window
// (> 0).
func NewSlidingLog(limit int, window time.Duration) (SlidingLog, error) {
	if err := (Config{Mode: SlidingLogMode, Limit: limit, Window: window}).Validate(); err != nil {
		return SlidingLog{}, err
	}
	return SlidingLog{limit: limit, window: int64(window)}, nil
}

// SlidingLogStateOf returns a state holding times, oldest first, for example
// read back from a store. The times are copied.
func SlidingLogStateOf(times []int64) SlidingLogState {
	buf := append([]int64(nil), times...)
	return SlidingLogState{buf: buf, n: int32(len(buf))}
}

// Times appends the logged instants, oldest first, to dst and returns it.
func (s SlidingLogState) Times(dst []int64) []int64 {
	for i := range int(s.n) {
		dst = append(dst, s.at(i))
	}
	return dst
}

// at returns the i-th oldest entry.
func (s *SlidingLogState) at(i int) int64 {
	j := int(s.head) + i
	if j >= len(s.buf) {
		j -= len(s.buf)
	}
	return s.buf[j]
}

// Fresh returns the state of a key never seen.
func (r SlidingLog) Fresh(now int64) SlidingLogState { return freshPure[SlidingLogState](r, now) }

// Decide admits or rejects cost units at now (nanoseconds) and returns the
// decision and the new state. It returns an error only for cost < 1
// (ErrInvalidCost) or cost > Limit (ErrCostTooLarge).
func (r SlidingLog) Decide(s SlidingLogState, now int64, cost int) (Decision, SlidingLogState, error) {
	return decidePure(r, s, now, cost)
}

// IsFresh reports whether s is indistinguishable from Fresh at now: every
// entry has expired.
func (r SlidingLog) IsFresh(s SlidingLogState, now int64) bool { return r.isFresh(&s, now) }

func (r SlidingLog) init(s *SlidingLogState, now int64) { s.head, s.n = 0, 0 }
func (r SlidingLog) capacity() int                      { return r.limit }
func (r SlidingLog) capacityName() string               { return "limit" }

// expire drops the entries no longer counted at now.
func (r SlidingLog) expire(s *SlidingLogState, now int64) {
	for s.n > 0 && s.buf[s.head] <= now-r.window {
		s.head++
		if int(s.head) == len(s.buf) {
			s.head = 0
		}
		s.n--
	}
	if s.n == 0 {
		s.head = 0
	}
}

// grow makes room for need entries, doubling the ring up to Limit. It is the
// only allocation of any rule, and stops once a key's ring reaches its
// steady size.
func (r SlidingLog) grow(s *SlidingLogState, need int) {
	size := max(4, 2*len(s.buf), need)
	size = min(size, r.limit)
	buf := make([]int64, size)
	for i := range int(s.n) {
		buf[i] = s.at(i)
	}
	s.buf, s.head = buf, 0
}

func (r SlidingLog) decide(s *SlidingLogState, now int64, cost int) Decision {
	r.expire(s, now)
	n := int(s.n)
	if n+cost <= r.limit {
		if n+cost > len(s.buf) {
			r.grow(s, n+cost)
		}
		// Entries stay sorted: a now before the newest entry is logged at
		// the newest entry's instant (it then expires later, never earlier).
		t := now
		if n > 0 {
			t = max(t, s.at(n-1))
		}
		j := int(s.head) + n
		for range cost {
			if j >= len(s.buf) {
				j -= len(s.buf)
			}
			s.buf[j] = t
			j++
		}
		s.n += int32(cost)
		return Decision{Allowed: true, Remaining: r.limit - int(s.n)}
	}
	// The (n+cost−limit)-th oldest entry must expire first.
	k := n + cost - r.limit
	return Decision{Remaining: r.limit - n, RetryAfter: time.Duration(s.at(k-1) + r.window - now)}
}

func (r SlidingLog) isFresh(s *SlidingLogState, now int64) bool {
	return s.n == 0 || s.at(int(s.n)-1) <= now-r.window
}

func (r SlidingLog) freshAt(s *SlidingLogState) int64 {
	if s.n == 0 {
		return -1 << 63
	}
	return s.at(int(s.n)-1) + r.window
}

func (r SlidingLog) String() string {
	return fmt.Sprintf("sliding_log(limit=%d, window=%s)", r.limit, time.Duration(r.window))
}
