package jetstream

import (
	"log/slog"
	"testing"
	"time"
)

// A gap in the beat longer than half the pinned TTL past its period
// fences the starts until a refresh begun after the gap read the pin; a
// refresh begun before it (its answer came after the thaw) does not lift
// it.
func TestThawFencesUntilThePinIsRead(t *testing.T) {
	t.Parallel()
	q := &Queue{st: &Store{set: Settings{PinnedTTL: time.Second}, log: slog.New(slog.DiscardHandler)}}
	t0 := time.Now()
	q.thaw.every = beatEvery(time.Second) // 250 ms
	q.beatLocked(t0)
	if q.stallLocked(t0.Add(700*time.Millisecond)) || q.stallLocked(t0.Add(750*time.Millisecond)) {
		t.Fatal("a gap within the beat's period plus half the pinned TTL fenced the starts")
	}
	q.beatLocked(t0.Add(700 * time.Millisecond))
	thawed := t0.Add(4 * time.Second)
	if !q.stallLocked(thawed) {
		t.Fatal("a 3.3 s gap at a pinned TTL of 1 s did not fence the starts")
	}
	q.beatLocked(thawed.Add(10 * time.Millisecond)) // the beat right after the thaw
	if !q.stallLocked(thawed.Add(20 * time.Millisecond)) {
		t.Fatal("the fence fell with the next beat; want it up until the pin is read")
	}
	if q.liftLocked(thawed.Add(-time.Second)) {
		t.Fatal("a refresh begun before the thaw lifted the fence")
	}
	if !q.liftLocked(thawed.Add(30*time.Millisecond)) || q.stallLocked(thawed.Add(40*time.Millisecond)) {
		t.Fatal("a refresh begun after the thaw did not lift the fence")
	}
	if q.liftLocked(thawed.Add(50 * time.Millisecond)) {
		t.Fatal("lifted a fence that was down")
	}
}

// The first beat fences nothing: there was no beat before it.
func TestThawBeforeTheFirstBeat(t *testing.T) {
	t.Parallel()
	q := &Queue{st: &Store{set: Settings{PinnedTTL: time.Second}, log: slog.New(slog.DiscardHandler)}}
	if q.stallLocked(time.Now()) {
		t.Fatal("a queue whose keep-alive has not started fenced its starts")
	}
}
