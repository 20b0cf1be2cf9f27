package policy

import (
	"math"
	"testing"
	"time"
)

// TestKeptToSave steps one Kept (adaptive, ceiling 50/s) through starts,
// saves and values to save at fixed instants.
func TestKeptToSave(t *testing.T) {
	type step struct {
		name   string
		now    time.Duration // after t0
		starts int           // starts before asking
		rate   float64
		window time.Duration
		due    bool
		save   bool // book it as saved when due
	}
	steps := []step{
		{name: "the bare ceiling is no news", rate: 50},
		{name: "a window learned", now: time.Second, rate: 50, window: time.Second, due: true, save: true},
		{name: "unchanged", now: 2 * time.Second, starts: 3, rate: 50, window: time.Second},
		{name: "a rate cut", now: 3 * time.Second, rate: 37, window: time.Second, due: true, save: true},
		{name: "unchanged, refresh not yet due", now: KeepRefresh, starts: 1, rate: 37, window: time.Second},
		{name: "unchanged, refresh due", now: KeepRefresh + 3*time.Second, rate: 37, window: time.Second, due: true, save: true},
		{name: "refreshed, no start since", now: 2*KeepRefresh + 4*time.Second, rate: 37, window: time.Second},
	}
	var k Kept
	k.Configure(true, 50)
	for _, st := range steps {
		now := t0.Add(st.now)
		for range st.starts {
			k.Started(now, try(now))
		}
		v, n, due := k.ToSave(now, st.rate, st.window)
		if due != st.due || v != (Learned{Rate: st.rate, Window: st.window, At: now}) {
			t.Fatalf("%s: ToSave = %+v, %v; want due %v", st.name, v, due, st.due)
		}
		if due && st.save {
			k.Saved(v, n)
		}
	}
	var off Kept
	off.Configure(false, 50)
	if _, _, due := off.ToSave(t0, 10, time.Second); due {
		t.Error("a lane that is not adaptive has a value due")
	}
}

// TestKeptRestore: a kept value is used when sane, not stale and newer
// than the lane's own; its rate is capped at the ceiling and floored at
// KeptFloor of it.
func TestKeptRestore(t *testing.T) {
	now := t0.Add(time.Hour)
	tests := []struct {
		name string
		on   bool
		own  time.Time // the lane's own value's At (zero = none)
		v    Learned
		ok   bool
		rate float64
	}{
		{"kept", true, time.Time{}, Learned{Rate: 40, Window: time.Second, At: now.Add(-time.Minute)}, true, 40},
		{"capped", true, time.Time{}, Learned{Rate: 80, At: now.Add(-time.Minute)}, true, 50},
		{"floored", true, time.Time{}, Learned{Rate: 0.1, At: now.Add(-time.Minute)}, true, 2.5},
		{"almost stale", true, time.Time{}, Learned{Rate: 40, At: now.Add(-LearnedMaxAge)}, true, 40},
		{"stale", true, time.Time{}, Learned{Rate: 40, At: now.Add(-LearnedMaxAge - time.Nanosecond)}, false, 0},
		{"zero rate", true, time.Time{}, Learned{At: now}, false, 0},
		{"infinite rate", true, time.Time{}, Learned{Rate: math.Inf(1), At: now}, false, 0},
		{"negative window", true, time.Time{}, Learned{Rate: 40, Window: -1, At: now}, false, 0},
		{"older than the lane's own", true, now.Add(-time.Second), Learned{Rate: 40, At: now.Add(-2 * time.Second)}, false, 0},
		{"as old as the lane's own", true, now.Add(-time.Second), Learned{Rate: 40, At: now.Add(-time.Second)}, false, 0},
		{"newer than the lane's own", true, now.Add(-2 * time.Second), Learned{Rate: 40, At: now.Add(-time.Second)}, true, 40},
		{"not adaptive", false, time.Time{}, Learned{Rate: 40, At: now}, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var k Kept
			k.Configure(true, 50)
			if !tt.own.IsZero() {
				k.Saved(Learned{Rate: 30, At: tt.own}, 0)
			}
			k.Configure(tt.on, 50)
			v, ok := k.Restore(tt.v, now)
			if ok != tt.ok || (ok && v.Rate != tt.rate) {
				t.Fatalf("Restore = %+v, %v; want rate %v, %v", v, ok, tt.rate, tt.ok)
			}
			if ok {
				if _, _, due := k.ToSave(now, v.Rate, v.Window); due {
					t.Error("a value just used is due to be saved")
				}
			}
		})
	}
}

// TestKeptTakeover steps the takeover rule: jobs handed over after a gap
// of TakeoverGap without a start or a read call for a read, which holds
// every start until it is answered.
func TestKeptTakeover(t *testing.T) {
	gap := TakeoverGap
	steps := []struct {
		name     string
		now      time.Duration
		last     time.Duration // the last start's slot; -1 = none
		takeover bool
		ask      bool // then Asking
		answer   bool // then Answered
		read     bool // then Asked (a read that was not a takeover)
		held     bool // the gate after
	}{
		{name: "never started, never read", now: 0, last: -1, takeover: true, ask: true, held: true},
		{name: "a read in flight", now: gap, last: -1, held: true},
		{name: "answered", now: gap, last: -1, answer: true},
		{name: "a gap since the last read", now: 2 * gap, last: -1, takeover: true, read: true},
		{name: "read just now", now: 3*gap - time.Nanosecond, last: -1},
		{name: "started recently", now: 4 * gap, last: 4*gap - time.Second},
		{name: "a gap since the last start and the last read", now: 4 * gap, last: 3 * gap, takeover: true},
	}
	var k Kept
	k.Configure(true, 50)
	for _, st := range steps {
		now, last := t0.Add(st.now), time.Time{}
		if st.last >= 0 {
			last = t0.Add(st.last)
		}
		if got := k.Takeover(now, last); got != st.takeover {
			t.Fatalf("%s: Takeover = %v, want %v", st.name, got, st.takeover)
		}
		if st.ask {
			k.Asking(now)
		}
		if st.answer {
			k.Answered()
		}
		if st.read {
			k.Asked(now)
		}
		if held := k.Gate(now, 0).Held; held != st.held {
			t.Fatalf("%s: held %v, want %v", st.name, held, st.held)
		}
	}
	var off Kept
	if off.Takeover(t0, time.Time{}) || off.Gate(t0, 0) != (Gate{}) {
		t.Error("a lane that is not adaptive takes over or is held")
	}
}
