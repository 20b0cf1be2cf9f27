package policy

import (
	"testing"
	"time"
)

// TestQuotaLearnsWindow: without an advertised limit's window (X-RateLimit
// style) the window is the longest reset seen, in whole seconds; without
// Limit there is no cap, only the remaining count.
func TestQuotaLearnsWindow(t *testing.T) {
	var s Advertised
	s.learn(&Quota{Limit: 30, Remaining: 3, Reset: 400 * time.Millisecond})
	if s.window != time.Second || s.cap != 30 {
		t.Errorf("window %v cap %v, want 1s and 30/s", s.window, s.cap)
	}
	s.learn(&Quota{Limit: 30, Remaining: 3, Reset: 2500 * time.Millisecond})
	if s.window != 3*time.Second || s.cap != 10 {
		t.Errorf("window %v cap %v, want 3s and 10/s", s.window, s.cap)
	}
	s.learn(&Quota{Limit: 120, Window: time.Minute, Remaining: -1, Reset: -1})
	if s.window != time.Minute || s.cap != 2 {
		t.Errorf("advertised window: %v cap %v, want 1m and 2/s", s.window, s.cap)
	}
	var n Advertised
	n.learn(&Quota{Remaining: 0, Reset: time.Second})
	if n.cap != 0 {
		t.Errorf("cap %v without a limit, want none", n.cap)
	}
}

// TestAdvertised steps one Advertised through starts, answers and gates
// at fixed instants.
func TestAdvertised(t *testing.T) {
	type step struct {
		name     string
		now      time.Time
		start    bool   // a try starts at now
		quota    *Quota // an answer at now with this quota (nil: none)
		class    Class
		inflight int // in flight at now (after the answer)
		want     Gate
		paused   time.Time // the pushback's Until after the step
	}
	q := func(limit, rem int, reset time.Duration) *Quota {
		return &Quota{Limit: limit, Remaining: rem, Reset: reset}
	}
	var pb Pushback
	var pauses []time.Time
	var s Advertised
	set := Compose(&s, &pb) // the quota's pause goes through the Pushback
	for _, st := range []step{
		{name: "nothing known", now: at(0), want: Gate{}},
		{name: "3 left", now: at(10), quota: q(10, 3, time.Second), want: Gate{}},
		{name: "start 1", now: at(20), start: true, inflight: 1, want: Gate{}},
		{name: "start 2", now: at(30), start: true, inflight: 2, want: Gate{}},
		{name: "start 3: none left, held to the reset", now: at(40), start: true, inflight: 3, want: Gate{NotBefore: at(1010)}},
		{name: "reset passed: refilled, less in flight", now: at(1010), inflight: 3, want: Gate{}},
		{name: "remaining 0 pauses until the reset", now: at(1100), quota: q(10, 0, 2*time.Second), inflight: 0,
			want: Gate{NotBefore: at(3100)}, paused: at(3100)},
		{name: "a pushback with remaining 0 does not pause again", now: at(1200), quota: q(10, 0, 3*time.Second),
			class: PushedBack, want: Gate{NotBefore: at(3100)}, paused: at(3100)},
	} {
		if st.start {
			s.Started(st.now, try(st.now))
		}
		if st.quota != nil {
			for _, ev := range set.Finished(st.now, Answer{Try: try(st.now), Class: st.class, Quota: st.quota, Inflight: st.inflight}) {
				if ev.Kind == QuotaPaused {
					pauses = append(pauses, ev.At)
				}
			}
		}
		if g := s.Gate(st.now, st.inflight); g != st.want {
			t.Fatalf("%s: gate %+v, want %+v", st.name, g, st.want)
		}
		if !pb.Until().Equal(st.paused) {
			t.Fatalf("%s: paused until %v, want %v", st.name, pb.Until(), st.paused)
		}
	}
	if len(pauses) != 1 || !pauses[0].Equal(at(3100)) {
		t.Errorf("paused (QuotaPaused) with %v, want once with the reset", pauses)
	}
	if s.Cap() != 10.0/3 {
		t.Errorf("cap %v, want 10 per 3 s (the window: the longest reset seen)", s.Cap())
	}
}

// TestAdvertisedHeldWithoutReset: no reset advertised and none left holds
// starts while tries are in flight (an answer will tell more), and lets
// one probe go when none is.
func TestAdvertisedHeldWithoutReset(t *testing.T) {
	for _, tc := range []struct {
		name     string
		inflight int
		want     Gate
	}{
		{"in flight: held", 1, Gate{Held: true}},
		{"none in flight: a probe may go", 0, Gate{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Advertised
			s.Finished(at(0), Answer{Try: try(at(0)), Quota: &Quota{Remaining: 0, Reset: -1}, Inflight: tc.inflight})
			if g := s.Gate(at(10), tc.inflight); g != tc.want {
				t.Errorf("gate %+v, want %+v", g, tc.want)
			}
		})
	}
}

// TestAdvertisedPauseBounded: a reset past the lane's max wait pauses only
// that long.
func TestAdvertisedPauseBounded(t *testing.T) {
	var pb Pushback
	s := Advertised{MaxWait: 3 * time.Second}
	set := Compose(&s, &pb)
	set.Finished(at(0), Answer{Try: try(at(0)), Quota: &Quota{Remaining: 0, Reset: MaxQuotaPause}})
	if !pb.Until().Equal(at(3000)) {
		t.Errorf("paused until %v, want max wait after the answer (%v)", pb.Until(), at(3000))
	}
}
