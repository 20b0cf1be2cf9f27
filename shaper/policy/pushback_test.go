package policy

import (
	"testing"
	"time"
)

// TestPushback steps one Pushback through answers, holds and gates at
// fixed instants.
func TestPushback(t *testing.T) {
	type step struct {
		name    string
		now     time.Time
		do      func(p *Pushback, now time.Time)
		gate    time.Time // Gate's NotBefore at now, after do
		pausing bool
	}
	answer := func(c Class, wait time.Duration, cancelled bool) func(*Pushback, time.Time) {
		return func(p *Pushback, now time.Time) {
			p.Finished(now, Answer{Try: try(now), Class: c, RetryAfter: wait, Cancelled: cancelled})
		}
	}
	hold := func(until time.Time) func(*Pushback, time.Time) {
		return func(p *Pushback, now time.Time) { p.Hold(now, until) }
	}
	nothing := func(*Pushback, time.Time) {}
	var p Pushback
	for _, s := range []step{
		{"fresh: no pause", at(0), nothing, time.Time{}, false},
		{"success: no pause", at(0), answer(Succeeded, 0, false), time.Time{}, false},
		{"429 for 2s", at(100), answer(PushedBack, 2*time.Second, false), at(2100), true},
		{"shorter pushback keeps the longer", at(200), answer(PushedBack, time.Second, false), at(2100), true},
		{"shorter quota hold ignored", at(300), hold(at(1000)), at(2100), true},
		{"longer quota hold extends", at(400), hold(at(3000)), at(3000), true},
		{"still pausing before the end", at(2999), nothing, at(3000), true},
		{"over at its end; the floor stays", at(3000), nothing, at(3000), false},
		{"cancelled at shutdown: not booked", at(3100), answer(PushedBack, time.Minute, true), at(3000), false},
		{"hold not after now: nothing", at(4000), hold(at(3500)), at(3000), false},
		{"zero Retry-After: a pause that ends at once", at(5000), answer(PushedBack, 0, false), at(5000), false},
	} {
		s.do(&p, s.now)
		g := p.Gate(s.now, 0)
		if !g.NotBefore.Equal(s.gate) || p.Pausing() != s.pausing || g.Held || g.Rate != 0 || g.Limit != 0 {
			t.Fatalf("%s: gate %+v pausing %v, want not before %v, pausing %v", s.name, g, p.Pausing(), s.gate, s.pausing)
		}
	}
}
