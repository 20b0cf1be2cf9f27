package policy

import (
	"testing"
	"time"
)

// TestPaused: a pause holds every start while on, whatever the tries,
// and gives no time to wake for; off, it allows everything.
func TestPaused(t *testing.T) {
	var p Paused
	steps := []struct {
		name string
		on   bool
		want Gate
	}{
		{"zero value", false, Gate{}},
		{"paused", true, Gate{Held: true}},
		{"still paused after answers", true, Gate{Held: true}},
		{"resumed", false, Gate{}},
	}
	// Whatever the tries: it books none (it plays neither Starter nor
	// Finisher).
	if _, ok := any(&p).(Starter); ok {
		t.Fatal("Paused books starts")
	}
	if _, ok := any(&p).(Finisher); ok {
		t.Fatal("Paused books answers")
	}
	for i, st := range steps {
		now := t0.Add(time.Duration(i) * time.Second)
		p.On = st.on
		if g := p.Gate(now, 1); g != st.want {
			t.Fatalf("%s: Gate = %+v, want %+v", st.name, g, st.want)
		}
	}
}

// TestPausedTimed: a timed pause answers NotBefore its end while it runs,
// ends by itself there (the end stays the schedule's floor), and a pause
// until a time already past is no pause.
func TestPausedTimed(t *testing.T) {
	var p Paused
	end := at(3000)
	steps := []struct {
		name    string
		now     time.Time
		do      func(now time.Time) bool // nil: only ask
		changed bool
		want    Gate
		holding bool
	}{
		{"paused for 3 s", at(0), func(now time.Time) bool { return p.Pause(now, end) }, true, Gate{NotBefore: end}, true},
		{"the same pause again changes nothing", at(100), func(now time.Time) bool { return p.Pause(now, end) }, false, Gate{NotBefore: end}, true},
		{"still held just before the end", at(2999), nil, false, Gate{NotBefore: end}, true},
		{"over at its end; the end is the floor", at(3000), nil, false, Gate{NotBefore: end}, false},
		{"after it, only the floor", at(5000), nil, false, Gate{NotBefore: end}, false},
		{"until a past time is no pause", at(5000), func(now time.Time) bool { return p.Pause(now, at(4000)) }, false, Gate{NotBefore: end}, false},
		{"until resumed", at(6000), func(now time.Time) bool { return p.Pause(now, time.Time{}) }, true, Gate{Held: true}, true},
		{"timed pause replaces it", at(6500), func(now time.Time) bool { return p.Pause(now, at(9000)) }, true, Gate{NotBefore: at(9000)}, true},
		{"resume ends it early", at(7000), func(time.Time) bool { return p.Resume() }, true, Gate{NotBefore: end}, false},
	}
	for _, st := range steps {
		changed := false
		if st.do != nil {
			changed = st.do(st.now)
		}
		if changed != st.changed {
			t.Fatalf("%s: changed = %v, want %v", st.name, changed, st.changed)
		}
		if h := p.Holding(st.now); h != st.holding {
			t.Fatalf("%s: Holding = %v, want %v", st.name, h, st.holding)
		}
		if g := p.Gate(st.now, 0); g != st.want {
			t.Fatalf("%s: Gate = %+v, want %+v", st.name, g, st.want)
		}
	}
}
