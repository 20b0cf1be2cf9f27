package daemon

import (
	"fmt"
	"testing"
	"time"
)

func TestDedupeWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	d := newDedupe(2*time.Minute, 100)
	d.remember(t0, "a", "job-a")
	if id, ok := d.lookup(t0.Add(time.Minute), "a"); !ok || id != "job-a" {
		t.Fatalf("lookup within window = %q, %v", id, ok)
	}
	d.remember(t0.Add(time.Minute), "a", "job-other") // a repeat does not replace the first
	if id, _ := d.lookup(t0.Add(90*time.Second), "a"); id != "job-a" {
		t.Errorf("first job id replaced: %q", id)
	}
	if _, ok := d.lookup(t0.Add(2*time.Minute), "a"); ok {
		t.Error("id still remembered when its window ended")
	}
	if d.len() != 0 {
		t.Errorf("%d ids held after expiry", d.len())
	}
}

func TestDedupeCapEvictsOldest(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	d := newDedupe(time.Hour, 3)
	for i := range 5 {
		d.remember(t0, fmt.Sprint(i), fmt.Sprint("job-", i))
	}
	if d.len() != 3 || d.evicted != 2 {
		t.Fatalf("len %d evicted %d, want 3 and 2", d.len(), d.evicted)
	}
	for i, want := range []bool{false, false, true, true, true} {
		if _, ok := d.lookup(t0, fmt.Sprint(i)); ok != want {
			t.Errorf("id %d remembered = %v, want %v", i, ok, want)
		}
	}
}

// Memory follows live ids: a long run of expiring ids keeps the FIFO compact.
func TestDedupeCompacts(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	d := newDedupe(time.Second, 1<<20)
	for i := range 100000 {
		d.remember(t0.Add(time.Duration(i)*time.Millisecond), fmt.Sprint(i), "j")
	}
	if d.len() > 1001 || len(d.order)-d.head > 1001 || cap(d.order) > 8192 {
		t.Errorf("len %d, fifo %d (head %d, cap %d): expired ids not released", d.len(), len(d.order), d.head, cap(d.order))
	}
}

func TestDedupeZeroWindowRemembersNothing(t *testing.T) {
	d := newDedupe(0, 10)
	d.remember(time.Now(), "a", "j")
	if d.len() != 0 {
		t.Error("window 0 should disable dedupe")
	}
}
