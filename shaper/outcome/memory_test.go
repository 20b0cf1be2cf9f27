package outcome

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func rec(id string, st State) Entry {
	return Entry{Record: Record{JobID: id, Downstream: "pay", State: st}, Keep: time.Minute, Max: 3}
}

func TestMemoryDiscardsTheOldestFinishedNeverAQueuedOne(t *testing.T) {
	discarded := 0
	m := NewMemory(func(ds string, n int) { discarded += n })
	ctx := context.Background()
	// Two queued jobs, then three that end: the bound of 3 discards the
	// finished ones, oldest first, and never the queued ones.
	_ = m.Put(ctx, []Entry{rec("q1", Queued), rec("q2", Queued)})
	for i := range 3 {
		_ = m.Put(ctx, []Entry{rec(fmt.Sprint("f", i), Succeeded)})
	}
	for _, id := range []string{"q1", "q2", "f2"} {
		if _, ok, _ := m.Get(ctx, "pay", id); !ok {
			t.Fatalf("record %s was discarded", id)
		}
	}
	for _, id := range []string{"f0", "f1"} {
		if _, ok, _ := m.Get(ctx, "pay", id); ok {
			t.Fatalf("record %s was kept past the bound", id)
		}
	}
	if discarded != 2 || m.Len("pay") != 3 {
		t.Fatalf("discarded %d, len %d; want 2 and 3", discarded, m.Len("pay"))
	}
	// Queued jobs past the bound stay: only finished records make room.
	_ = m.Put(ctx, []Entry{rec("q3", Queued), rec("q4", Queued)})
	if m.Len("pay") != 4 {
		t.Fatalf("len %d, want 4 (four queued jobs)", m.Len("pay"))
	}
	// A queued job that ends replaces its record (with room for it).
	e := rec("q1", Failed)
	e.Max = 10
	_ = m.Put(ctx, []Entry{e})
	if r, _, _ := m.Get(ctx, "pay", "q1"); r.State != Failed {
		t.Fatalf("q1 = %s, want failed", r.State)
	}
}

func TestMemoryForgetsAFinishedRecordAfterItsKeep(t *testing.T) {
	now := time.Unix(1000, 0)
	m := NewMemory(nil)
	m.now = func() time.Time { return now }
	ctx := context.Background()
	_ = m.Put(ctx, []Entry{rec("q", Queued), rec("done", Succeeded)})
	now = now.Add(time.Minute - time.Nanosecond)
	if _, ok, _ := m.Get(ctx, "pay", "done"); !ok {
		t.Fatal("record gone before its keep")
	}
	now = now.Add(time.Nanosecond)
	if _, ok, _ := m.Get(ctx, "pay", "done"); ok {
		t.Fatal("record kept past its keep")
	}
	now = now.Add(24 * time.Hour)
	_ = m.Put(ctx, []Entry{rec("other", Started)})
	if _, ok, _ := m.Get(ctx, "pay", "q"); !ok {
		t.Fatal("a queued job's record expired")
	}
	if m.Len("pay") != 2 {
		t.Fatalf("len %d, want 2 (the expired record swept)", m.Len("pay"))
	}
}

func TestMemoryBoundsTheAnswersItHolds(t *testing.T) {
	discarded := 0
	m := NewMemory(func(ds string, n int) { discarded += n })
	ctx := context.Background()
	body := make([]byte, 1<<20)
	for i := range 80 { // 80 MiB of answers: past MaxMemoryBytes
		e := Entry{Record: Record{JobID: fmt.Sprint("j", i), Downstream: "pay", State: Succeeded,
			Result: &Result{Body: body, Bytes: len(body)}}, Keep: time.Hour}
		_ = m.Put(ctx, []Entry{e})
	}
	if _, ok, _ := m.Get(ctx, "pay", "j0"); ok {
		t.Fatal("the oldest answer was kept past the byte bound")
	}
	if _, ok, _ := m.Get(ctx, "pay", "j79"); !ok {
		t.Fatal("the newest answer was discarded")
	}
	if m.Len("pay") != MaxMemoryBytes/(1<<20+recordOverhead) || discarded != 80-m.Len("pay") {
		t.Fatalf("len %d, discarded %d", m.Len("pay"), discarded)
	}
}
