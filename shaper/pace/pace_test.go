package pace

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestScheduleSlots: at 2/s a start holds 500 ms; a cost-3 job holds
// three intervals; a new rate applies to the next start at once.
func TestScheduleSlots(t *testing.T) {
	var s Schedule
	s.SetRate(2)
	if got := s.SlotFor(t0, time.Time{}); !got.Equal(t0) {
		t.Fatalf("first slot %v, want t0", got)
	}
	s.Start(t0, 1)
	if got := s.Next(); !got.Equal(t0.Add(500 * time.Millisecond)) {
		t.Fatalf("next after one start: %v, want t0+500ms", got.Sub(t0))
	}
	s.Start(s.Next(), 3)
	if got := s.Next().Sub(t0); got != 2*time.Second {
		t.Fatalf("next after a cost-3 start at 500ms: %v, want 2s", got)
	}
	s.SetRate(4) // the cost-3 start now holds 3 × 250 ms
	if got := s.Next().Sub(t0); got != 1250*time.Millisecond {
		t.Fatalf("next at the new rate: %v, want 1.25s", got)
	}
	if got := s.SlotFor(t0, t0.Add(3*time.Second)).Sub(t0); got != 3*time.Second {
		t.Fatalf("slot with a NotBefore past next: %v, want 3s", got)
	}
}

// TestScheduleHeldAndRestart: what the last start still holds, and no
// catch-up after idle.
func TestScheduleHeldAndRestart(t *testing.T) {
	var s Schedule
	s.SetRate(10) // 100 ms
	if n, _ := s.Held(t0); n != 0 {
		t.Fatalf("held before any start: %d, want 0", n)
	}
	s.Start(t0, 3) // holds until t0+300ms
	n, first := s.Held(t0.Add(50 * time.Millisecond))
	if n != 3 || first != 50*time.Millisecond {
		t.Fatalf("held at 50ms: %d slots, first free after %v; want 3 and 50ms", n, first)
	}
	if n, _ := s.Held(t0.Add(300 * time.Millisecond)); n != 0 {
		t.Fatalf("held once drained: %d, want 0", n)
	}
	s.RestartFrom(t0.Add(time.Hour))
	if got := s.Next().Sub(t0); got != time.Hour {
		t.Fatalf("next after an idle hour: %v, want 1h (no catch-up)", got)
	}
	s.RestartFrom(t0) // never earlier
	if got := s.Next().Sub(t0); got != time.Hour {
		t.Fatalf("next after a restart from the past: %v, want still 1h", got)
	}
	if got := IntervalOf(3); got != 333333333*time.Nanosecond {
		t.Fatalf("IntervalOf(3) = %v, want 333.333333ms", got)
	}
}
