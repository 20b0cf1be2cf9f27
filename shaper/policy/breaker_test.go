package policy

import (
	"testing"
	"time"
)

// TestBreaker steps one breaker (2 failures, open 1 s, at most 3 s)
// through answers and gates at fixed instants.
func TestBreaker(t *testing.T) {
	var events []EventKind
	var b Breaker
	b.Configure(BreakerSettings{Failures: 2, OpenFor: time.Second, MaxOpenFor: 3 * time.Second})
	old, probe, probe2 := try(at(0)), try(at(1300)), try(at(3400))
	type step struct {
		name  string
		now   time.Time
		do    func(now time.Time)
		state BreakerState
		gate  Gate
	}
	answer := func(tr Try, c Class) func(time.Time) {
		return func(now time.Time) {
			if ev := b.Finished(now, Answer{Try: tr, Class: c}); ev.Kind != 0 {
				events = append(events, ev.Kind)
			}
		}
	}
	start := func(tr Try) func(time.Time) { return func(now time.Time) { b.Started(now, tr) } }
	for _, s := range []step{
		{"closed", at(0), start(old), BreakerClosed, Gate{}},
		{"one failure", at(100), answer(try(at(50)), Failed), BreakerClosed, Gate{}},
		{"a success resets the count", at(150), answer(try(at(60)), Succeeded), BreakerClosed, Gate{}},
		{"failure 1", at(200), answer(try(at(70)), Overloaded), BreakerClosed, Gate{}},
		{"a 4xx is a live answer", at(210), answer(try(at(75)), Refused), BreakerClosed, Gate{}},
		{"failure 1 once more", at(220), answer(try(at(76)), Overloaded), BreakerClosed, Gate{}},
		{"a 429 is a live answer", at(230), func(now time.Time) {
			b.Finished(now, Answer{Try: try(at(77)), Class: Overloaded, Limited: true})
		}, BreakerClosed, Gate{}},
		{"failure 1 again", at(250), answer(try(at(80)), Failed), BreakerClosed, Gate{}},
		{"failure 2 opens for 1 s", at(300), answer(try(at(90)), Failed), BreakerOpen, Gate{NotBefore: at(1300)}},
		{"a try from before is not booked", at(400), answer(old, Succeeded), BreakerOpen, Gate{NotBefore: at(1300)}},
		{"the probe is due", at(1300), func(time.Time) {}, BreakerHalfOpen, Gate{NotBefore: at(1300)}},
		{"the probe starts: held", at(1300), start(probe), BreakerHalfOpen, Gate{Held: true}},
		{"the probe fails: open 2 s", at(1400), answer(probe, Failed), BreakerOpen, Gate{NotBefore: at(3400)}},
		{"the next probe starts", at(3400), start(probe2), BreakerHalfOpen, Gate{Held: true}},
		{"it succeeds: closed, schedule from now", at(3500), answer(probe2, Succeeded), BreakerClosed, Gate{NotBefore: at(3500)}},
	} {
		s.do(s.now)
		if g := b.Gate(s.now, 0); g != s.gate || b.State(s.now) != s.state {
			t.Fatalf("%s: state %s gate %+v, want %s %+v", s.name, b.State(s.now), g, s.state, s.gate)
		}
		// Probe names the probe in flight only (the lane asks it before
		// booking an answer).
		if got, want := b.Probe(probe.Job) || b.Probe(probe2.Job), s.gate.Held; got != want {
			t.Fatalf("%s: Probe = %v, want %v", s.name, got, want)
		}
	}
	want := []EventKind{BreakerTripped, BreakerProbeFailed, BreakerProbed}
	if len(events) != len(want) || events[0] != want[0] || events[1] != want[1] || events[2] != want[2] {
		t.Errorf("events %v, want %v", events, want)
	}
}

// TestBreakerDoublingCapped: each failed probe doubles the opening, up to
// MaxOpenFor.
func TestBreakerDoublingCapped(t *testing.T) {
	var b Breaker
	b.Configure(BreakerSettings{Failures: 1, OpenFor: time.Second, MaxOpenFor: 3 * time.Second})
	b.Finished(at(0), Answer{Try: try(at(0)), Class: Failed})
	for i, want := range []time.Duration{2 * time.Second, 3 * time.Second, 3 * time.Second} {
		now := b.ProbeAt()
		p := try(now)
		b.Started(now, p)
		b.Finished(now, Answer{Try: p, Class: Failed})
		if got := b.ProbeAt().Sub(now); got != want {
			t.Fatalf("failed probe %d: open for %v, want %v", i+1, got, want)
		}
	}
}

// TestBreakerReleasedByReload: turned off while open, the breaker closes
// at the next Gate and the schedule restarts from then.
func TestBreakerReleasedByReload(t *testing.T) {
	var b Breaker
	b.Configure(BreakerSettings{Failures: 1, OpenFor: time.Minute, MaxOpenFor: time.Minute})
	b.Finished(at(0), Answer{Try: try(at(0)), Class: Failed})
	released := b.Configure(BreakerSettings{}).Kind == BreakerReleased
	if g := b.Gate(at(500), 0); g != (Gate{NotBefore: at(500)}) || b.State(at(500)) != BreakerClosed || !released {
		t.Errorf("after turning off: gate %+v state %s released %v; want not before now, closed, released", g, b.State(at(500)), released)
	}
}

// TestBreakerCancelledNotBooked: tries cancelled at shutdown say nothing.
func TestBreakerCancelledNotBooked(t *testing.T) {
	var b Breaker
	b.Configure(BreakerSettings{Failures: 1, OpenFor: time.Second, MaxOpenFor: time.Second})
	b.Finished(at(0), Answer{Try: try(at(0)), Class: Failed, Cancelled: true})
	if b.State(at(0)) != BreakerClosed {
		t.Errorf("state %s after a cancelled try, want closed", b.State(at(0)))
	}
}
