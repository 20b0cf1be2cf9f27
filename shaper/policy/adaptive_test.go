package policy

import (
	"testing"
	"time"
)

// TestAdaptive steps one controller (ceiling 100/s, concurrency 8)
// through an episode at fixed instants: answers at 50/s, a refusal cuts
// the rate to what was delivered (at most by half) and learns the tries in
// flight as a limit, an echo cuts nothing, and a round of successes after
// the quiet point raises the rate.
func TestAdaptive(t *testing.T) {
	cuts := 0
	var c Adaptive
	finish := func(now time.Time, a Answer) {
		if c.Finished(now, a).Kind == RateCut {
			cuts++
		}
	}
	c.Configure(AdaptiveSettings{On: true, Ceiling: 100, Concurrency: 8})
	ok := func(slot, now time.Time) { finish(now, Answer{Try: try(slot), Class: Succeeded}) }
	type step struct {
		name string
		do   func()
		want Gate
		cuts int
	}
	for _, s := range []step{
		{"starts at the ceiling", func() {}, Gate{Rate: 100}, 0},
		{"successes at 50/s keep it there", func() {
			for i := range 100 {
				ok(at(20*i), at(20*i))
			}
		}, Gate{Rate: 100}, 0},
		{"a refusal cuts to the delivered 50/s, limit 3 in flight", func() {
			finish(at(2000), Answer{Try: try(at(1990)), Class: Overloaded, Inflight: 3})
		}, Gate{Rate: 50, Limit: 3}, 1},
		{"an echo (a try from before the quiet point) cuts nothing", func() {
			finish(at(2050), Answer{Try: try(at(1995)), Class: PushedBack, Inflight: 3})
		}, Gate{Rate: 50, Limit: 3}, 1},
		{"echoes' successes raise nothing", func() { ok(at(2100), at(2100)) }, Gate{Rate: 50, Limit: 3}, 1},
		{"a round (25 at 50/s) after the quiet point: ×1.5", func() {
			for i := range 25 {
				ok(at(3000+20*i), at(3000+20*i))
			}
		}, Gate{Rate: 75, Limit: 3}, 1},
	} {
		s.do()
		if g := c.Gate(at(0), 0); g != s.want || cuts != s.cuts {
			t.Fatalf("%s: gate %+v cuts %d, want %+v and %d", s.name, g, cuts, s.want, s.cuts)
		}
	}
}

func TestAdaptiveConfigure(t *testing.T) {
	for _, tc := range []struct {
		name       string
		first, set AdaptiveSettings
		want       Gate
	}{
		{"off caps nothing", AdaptiveSettings{}, AdaptiveSettings{Ceiling: 10}, Gate{}},
		{"on: the ceiling", AdaptiveSettings{}, AdaptiveSettings{On: true, Ceiling: 10, Concurrency: 1}, Gate{Rate: 10}},
		{"a lower ceiling caps the rate", AdaptiveSettings{On: true, Ceiling: 10}, AdaptiveSettings{On: true, Ceiling: 4}, Gate{Rate: 4}},
		{"a higher ceiling keeps the rate", AdaptiveSettings{On: true, Ceiling: 10}, AdaptiveSettings{On: true, Ceiling: 40}, Gate{Rate: 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Adaptive
			c.Configure(tc.first)
			c.Configure(tc.set)
			if g := c.Gate(t0, 0); g != tc.want {
				t.Errorf("gate %+v, want %+v", g, tc.want)
			}
		})
	}
}

// TestAdaptiveQuotaCeiling: an advertised quota ÷ window caps the rate (not
// below the floor of the configured rate).
func TestAdaptiveQuotaCeiling(t *testing.T) {
	for _, tc := range []struct {
		name  string
		quota Quota
		want  float64
	}{
		{"20 per second", Quota{Limit: 20, Window: time.Second, Remaining: -1, Reset: -1}, 20},
		{"1 per second: the floor", Quota{Limit: 1, Window: time.Second, Remaining: -1, Reset: -1}, adaptFloor * 100},
		{"above the ceiling: the ceiling", Quota{Limit: 500, Window: time.Second, Remaining: -1, Reset: -1}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Advertised
			var c Adaptive // learns the cap from the answer, as s does
			c.Configure(AdaptiveSettings{On: true, Ceiling: 100, Concurrency: 1})
			a := Answer{Try: try(t0), Class: Refused, Quota: &tc.quota}
			s.Finished(t0, a)
			c.Finished(t0, a)
			if c.Rate() != tc.want {
				t.Errorf("rate %v, want %v", c.Rate(), tc.want)
			}
		})
	}
}

// TestAdaptiveRestore: a kept value is the rate and window from now on,
// and refusals of tries started before now are echoes.
func TestAdaptiveRestore(t *testing.T) {
	cuts := 0
	var c Adaptive
	c.Configure(AdaptiveSettings{On: true, Ceiling: 100, Concurrency: 1})
	c.Restore(30, 5*time.Second, at(1000))
	if c.Finished(at(1100), Answer{Try: try(at(900)), Class: Overloaded}).Kind == RateCut {
		cuts++
	}
	if c.Rate() != 30 || c.Window() != 5*time.Second || c.Memory() != 5*time.Second || cuts != 0 {
		t.Errorf("rate %v window %v memory %v cuts %d; want 30, 5s, 5s, 0", c.Rate(), c.Window(), c.Memory(), cuts)
	}
}
