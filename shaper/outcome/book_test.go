package outcome

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// flakyStore is a shared Store that refuses while down, and counts what
// it stored.
type flakyStore struct {
	mu     sync.Mutex
	down   bool
	stored []Entry
	*Memory
}

func (f *flakyStore) Put(ctx context.Context, entries []Entry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return errors.New("store unreachable")
	}
	f.stored = append(f.stored, entries...)
	return f.Memory.Put(ctx, entries)
}

func (f *flakyStore) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

func change(ds, id string, st State, shared bool, done func()) Change {
	return Change{Record: Record{JobID: id, Downstream: ds, State: st}, Keep: time.Hour, Shared: shared, Done: done}
}

func TestBookKeepsASharedStoresChangesThroughAnOutage(t *testing.T) {
	shared := &flakyStore{down: true, Memory: NewMemory(nil)}
	mem := NewMemory(nil)
	b := NewBook(mem, shared, nil, Observer{}, nil, func() time.Duration { return time.Second })
	var mu sync.Mutex
	done := map[string]int{}
	doneOf := func(id string) func() {
		return func() { mu.Lock(); done[id]++; mu.Unlock() }
	}
	ctx := context.Background()
	b.Note(change("erp", "d1", Queued, true, nil))
	b.Note(change("erp", "d1", Started, true, nil))
	b.Note(change("pay", "m1", Succeeded, false, doneOf("m1")))
	b.Note(change("erp", "d1", Succeeded, true, doneOf("d1")))
	if err := b.round(ctx); err == nil {
		t.Fatal("a round with the shared store down succeeded")
	}
	// The memory queue's change is booked; the shared ones wait, and are
	// found by Get from the book meanwhile. The start, held back, was
	// replaced by the end before it was due.
	if r, ok, _ := mem.Get(ctx, "pay", "m1"); !ok || r.State != Succeeded {
		t.Fatalf("memory record %+v %v", r, ok)
	}
	if r, ok, _ := b.Get(ctx, "erp", "d1", true); !ok || r.State != Succeeded {
		t.Fatalf("waiting record %+v %v", r, ok)
	}
	if b.Waiting() != 2 || done["m1"] != 1 || done["d1"] != 0 {
		t.Fatalf("waiting %d, done %v", b.Waiting(), done)
	}
	shared.setDown(false)
	if err := b.round(ctx); err != nil {
		t.Fatal(err)
	}
	// One write for the job's changes: the last.
	if len(shared.stored) != 1 || shared.stored[0].Record.State != Succeeded || done["d1"] != 1 || b.Waiting() != 0 {
		t.Fatalf("stored %+v, done %v, waiting %d", shared.stored, done, b.Waiting())
	}
}

func TestBookStopGivesUpWithinTheGrace(t *testing.T) {
	shared := &flakyStore{down: true, Memory: NewMemory(nil)}
	b := NewBook(NewMemory(nil), shared, nil, Observer{}, nil, func() time.Duration { return 50 * time.Millisecond })
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var ran sync.WaitGroup
	ran.Add(1)
	b.Note(change("erp", "d1", Succeeded, true, ran.Done))
	start := time.Now()
	_ = b.Stop()
	ran.Wait() // Done runs for a change given up: its job is settled
	if time.Since(start) > 20*time.Second || b.Waiting() != 0 {
		t.Fatalf("Stop took %s, %d waiting", time.Since(start), b.Waiting())
	}
	_ = b.Stop() // idempotent
}

func TestLatestKeepsTheLastFinishedNewestFirst(t *testing.T) {
	b := NewBook(NewMemory(nil), nil, nil, Observer{}, nil, nil)
	if got := b.Latest("pay"); len(got) != 0 {
		t.Fatalf("latest of a downstream with none: %v", got)
	}
	for i := range latestKept + 5 {
		b.Note(change("pay", fmt.Sprint(i), Succeeded, false, nil))
		b.Note(change("pay", fmt.Sprint("running", i), Started, false, nil)) // not finished: not listed
	}
	got := b.Latest("pay")
	if len(got) != latestKept || got[0].JobID != fmt.Sprint(latestKept+4) || got[latestKept-1].JobID != "5" {
		t.Fatalf("latest: %d records, first %s, last %s", len(got), got[0].JobID, got[len(got)-1].JobID)
	}
}

// toldEvents is a Teller that lists the events it was told.
type toldEvents struct {
	mu     sync.Mutex
	events []string
}

func (e *toldEvents) Event(rec *Record) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, rec.JobID+":"+string(rec.State))
	return nil
}

func (e *toldEvents) Outcome(string, *Record) error { return nil }

func (e *toldEvents) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.events...)
}

// stored lists what the shared store was asked to store, as id:state.
func (f *flakyStore) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.stored {
		out = append(out, e.Record.JobID+":"+string(e.Record.State))
	}
	return out
}

func TestBookStoresTheStartOfAShortTryNot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shared := &flakyStore{Memory: NewMemory(nil)}
		told := &toldEvents{}
		b := NewBook(NewMemory(nil), shared, told, Observer{}, nil, func() time.Duration { return time.Second })
		if err := b.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer b.Stop()
		ctx := t.Context()
		quick, slow := change("erp", "quick", Started, true, nil), change("erp", "slow", Started, true, nil)
		quick.Events, slow.Events = true, true
		b.Note(quick)
		b.Note(slow)
		synctest.Wait()
		// Their events are told at once; their records are held, and
		// found by Get meanwhile.
		if got := fmt.Sprint(told.list()); got != "[quick:started slow:started]" {
			t.Fatalf("events told at once: %s", got)
		}
		if r, ok, _ := b.Get(ctx, "erp", "slow", true); !ok || r.State != Started {
			t.Fatalf("a held start: %+v %v", r, ok)
		}
		if got := shared.list(); len(got) != 0 {
			t.Fatalf("stored before the hold ended: %v", got)
		}
		time.Sleep(startHold / 2)
		end := change("erp", "quick", Succeeded, true, nil)
		end.Events = true
		b.Note(end)
		synctest.Wait()
		if got := fmt.Sprint(shared.list()); got != "[quick:succeeded]" {
			t.Fatalf("a try ended within the hold: stored %s, want its end only", got)
		}
		time.Sleep(startHold)
		synctest.Wait()
		if got := fmt.Sprint(shared.list()); got != "[quick:succeeded slow:started]" {
			t.Fatalf("a try longer than the hold: stored %s, want its start once due", got)
		}
		if got := fmt.Sprint(told.list()); got != "[quick:started slow:started quick:succeeded]" {
			t.Fatalf("events: %s, each told once in order", got)
		}
		if r, ok, _ := b.Get(ctx, "erp", "slow", true); !ok || r.State != Started {
			t.Fatalf("a stored start: %+v %v", r, ok)
		}
	})
}

func TestBookStopStoresNoHeldStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shared := &flakyStore{Memory: NewMemory(nil)}
		b := NewBook(NewMemory(nil), shared, nil, Observer{}, nil, func() time.Duration { return time.Second })
		if err := b.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		b.Note(change("erp", "running", Started, true, nil))
		b.Note(change("erp", "ended", Failed, true, nil))
		synctest.Wait()
		_ = b.Stop()
		// The running job did not end: it stays queued, and its queue
		// tells that, not a record saying it started.
		if got := fmt.Sprint(shared.list()); got != "[ended:failed]" {
			t.Fatalf("stored %s", got)
		}
	})
}
