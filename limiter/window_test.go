package limiter

import (
	"math/big"
	"testing"
	"time"
)

// The window rules skip the division for a request in the state's window or
// the next, with conditional moves instead of branches. These tests hold
// them to the rules as defined: a division per request, and the sliding
// counter's estimate in exact rationals, over states and instants chosen
// around every boundary the shortcuts turn on (the state's window, the next,
// two windows on, time going backwards, negative instants).

// refFixedWindow is the fixed window by its definition.
func refFixedWindow(limit, window int64, s FixedWindowState, now int64, cost int) (Decision, FixedWindowState) {
	if start := floorDiv(now, window) * window; s.Count == 0 || start > s.Start {
		s.Start, s.Count = start, 0 // a later window; an earlier one counts against the state's
	}
	if s.Count+int64(cost) <= limit {
		s.Count += int64(cost)
		return Decision{Allowed: true, Remaining: int(limit - s.Count)}, s
	}
	return Decision{Remaining: int(limit - s.Count), RetryAfter: time.Duration(s.Start + window - now)}, s
}

// refSlidingCounter is the sliding counter by its definition: the estimate
// Prev×(Window−e)/Window + Curr as an exact fraction, and RetryAfter found
// by bisection (the estimate never rises as time passes, and two windows on
// it is 0).
func refSlidingCounter(limit, window int64, s SlidingCounterState, now int64, cost int) (Decision, SlidingCounterState) {
	roll := func(s SlidingCounterState, now int64) (SlidingCounterState, int64) {
		start := floorDiv(now, window) * window
		switch {
		case s.Prev == 0 && s.Curr == 0:
			s.Start = start
		case start < s.Start:
			return s, s.Start // an earlier window counts as the state's first instant
		case start == s.Start:
		case start == s.Start+window:
			s.Start, s.Prev, s.Curr = start, s.Curr, 0
		default:
			s.Start, s.Prev, s.Curr = start, 0, 0
		}
		return s, now
	}
	// free returns Limit − estimate − cost at now.
	free := func(s SlidingCounterState, now int64) *big.Rat {
		s, t := roll(s, now)
		f := big.NewRat(int64(s.Prev), 1)
		f.Mul(f, new(big.Rat).SetFrac(big.NewInt(window-(t-s.Start)), big.NewInt(window)))
		f.Add(f, big.NewRat(int64(s.Curr)+int64(cost), 1))
		return f.Sub(big.NewRat(limit, 1), f)
	}
	floor := func(r *big.Rat) int {
		q := new(big.Int).Div(r.Num(), r.Denom()) // Euclidean: the floor, as Denom > 0
		return max(0, int(q.Int64()))
	}
	rolled, _ := roll(s, now)
	if f := free(s, now); f.Sign() >= 0 {
		rolled.Curr += int32(cost)
		return Decision{Allowed: true, Remaining: floor(f)}, rolled
	}
	// Rejected at now+lo; admitted at now+hi, two windows after the later
	// of now and the state's window.
	lo, hi := int64(0), 2*window+max(0, rolled.Start-now)
	for hi-lo > 1 {
		if mid := lo + (hi-lo)/2; free(rolled, now+mid).Sign() >= 0 {
			hi = mid
		} else {
			lo = mid
		}
	}
	// Remaining counts what fits now, cost aside.
	rem := free(s, now)
	rem.Add(rem, big.NewRat(int64(cost), 1))
	return Decision{Remaining: floor(rem), RetryAfter: time.Duration(hi)}, rolled
}

// windowCases calls f for states and instants around every boundary.
func windowCases(f func(limit, window int64, start int64, a, b int32, now int64, cost int)) {
	x := xorshift(11)
	windows := []int64{3, int64(7 * time.Millisecond), int64(time.Second), int64(1500 * time.Millisecond), int64(time.Minute)}
	for i := range 3000 {
		w := windows[i%len(windows)]
		limit := []int64{1, 2, 20, 100, int64(1 + x.intn(1000))}[x.intn(5)]
		// A state's window: around t0, or before 1970 (floorDiv of negatives).
		k := t0.UnixNano()/w + int64(x.intn(5)) - 2
		if i%7 == 0 {
			k = -k
		}
		start := k * w
		counts := []int32{0, 1, int32(limit), int32(x.intn(int(limit) + 1))}
		a, b := counts[x.intn(4)], counts[x.intn(4)]
		for _, off := range []int64{-w - 1, -1, 0, 1, w / 2, w - 1, w, w + 1, w + w/3, 2*w - 1, 2 * w, 2*w + 1, 3 * w, int64(x.intn(int(5*w))) - w} {
			f(limit, w, start, a, b, start+off, 1+x.intn(int(limit)))
		}
	}
}

func TestFixedWindowMatchesDefinition(t *testing.T) {
	near := 0
	windowCases(func(limit, window, start int64, a, _ int32, now int64, cost int) {
		r, err := NewFixedWindow(int(limit), time.Duration(window))
		must(t, err)
		s := FixedWindowState{Start: start, Count: int64(a)}
		if a == 0 {
			s.Start = 0 // what init leaves
		}
		want, wantS := refFixedWindow(limit, window, s, now, cost)
		fast := s
		if _, ok := r.admitNear(&fast, now, cost); ok {
			near++
		} else if fast != s {
			t.Fatalf("%v %+v at %+d: admitNear declined but changed the state to %+v", r, s, now-start, fast)
		}
		got := s
		if d := r.decide(&got, now, cost); d != want || got != wantS {
			t.Fatalf("%v %+v at start%+d cost %d: got %+v → %+v, want %+v → %+v", r, s, now-start, cost, d, got, want, wantS)
		}
	})
	if near == 0 {
		t.Fatal("admitNear never applied: the cases miss the common path")
	}
}

func TestSlidingCounterMatchesDefinition(t *testing.T) {
	windowCases(func(limit, window, start int64, a, b int32, now int64, cost int) {
		r, err := NewSlidingCounter(int(limit), time.Duration(window))
		must(t, err)
		s := SlidingCounterState{Start: start, Prev: a, Curr: b}
		if a == 0 && b == 0 {
			s.Start = 0 // what init leaves
		}
		want, wantS := refSlidingCounter(limit, window, s, now, cost)
		got := s
		if d := r.decide(&got, now, cost); d != want || got != wantS {
			t.Fatalf("%v %+v at start%+d cost %d: got %+v → %+v, want %+v → %+v", r, s, now-start, cost, d, got, want, wantS)
		}
	})
}

// TestUnalignedStart: a hand-built state whose Start is not a multiple of
// Window keeps its windows until a request two or more windows later
// realigns it, as the state types' docs say.
func TestUnalignedStart(t *testing.T) {
	fw, err := NewFixedWindow(10, 10)
	must(t, err)
	s := FixedWindowState{Start: 5, Count: 3}
	for _, c := range []struct{ now, start, count int64 }{{12, 5, 4}, {16, 15, 1}, {24, 15, 2}, {47, 40, 1}} {
		fw.decide(&s, c.now, 1)
		if s.Start != c.start || s.Count != c.count {
			t.Fatalf("fixed window at %d: %+v, want Start %d Count %d", c.now, s, c.start, c.count)
		}
	}
	sc, err := NewSlidingCounter(10, 10)
	must(t, err)
	u := SlidingCounterState{Start: 5, Prev: 0, Curr: 3}
	for _, c := range []struct {
		now, start int64
		prev, curr int32
	}{{12, 5, 0, 4}, {16, 15, 4, 1}, {47, 40, 0, 1}} {
		sc.decide(&u, c.now, 1)
		if u.Start != c.start || u.Prev != c.prev || u.Curr != c.curr {
			t.Fatalf("sliding counter at %d: %+v, want Start %d Prev %d Curr %d", c.now, u, c.start, c.prev, c.curr)
		}
	}
}
