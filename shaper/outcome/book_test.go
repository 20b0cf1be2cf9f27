package outcome

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
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
	// found by Get from the book meanwhile.
	if r, ok, _ := mem.Get(ctx, "pay", "m1"); !ok || r.State != Succeeded {
		t.Fatalf("memory record %+v %v", r, ok)
	}
	if r, ok, _ := b.Get(ctx, "erp", "d1", true); !ok || r.State != Succeeded {
		t.Fatalf("waiting record %+v %v", r, ok)
	}
	if b.Waiting() != 3 || done["m1"] != 1 || done["d1"] != 0 {
		t.Fatalf("waiting %d, done %v", b.Waiting(), done)
	}
	shared.setDown(false)
	if err := b.round(ctx); err != nil {
		t.Fatal(err)
	}
	// One write for the job's three changes: the last.
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

// tellerLog is a Teller that writes down what it was told, in order.
type tellerLog struct {
	mu   sync.Mutex
	told []string
}

func (l *tellerLog) Event(rec *Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.told = append(l.told, "event "+rec.JobID+" "+string(rec.State))
	return nil
}

func (l *tellerLog) Outcome(subject string, rec *Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.told = append(l.told, "outcome "+rec.JobID+" "+string(rec.State)+" on "+subject)
	return nil
}

func (l *tellerLog) list() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprint(l.told)
}

// A change kept in memory is told by Note, at once and in order, without
// the book's goroutine; its outcome and Done still wait for a round, after
// its event. A shared change is told once a round stored it.
func TestBookTellsMemoryEventsAtNote(t *testing.T) {
	shared := &flakyStore{down: true, Memory: NewMemory(nil)}
	tell := &tellerLog{}
	var events []string
	obs := Observer{Told: func(ds string, st State) { events = append(events, ds+" "+string(st)) }}
	b := NewBook(NewMemory(nil), shared, tell, obs, nil, nil)
	ev := func(ds, id string, st State, shared bool, done func()) Change {
		c := change(ds, id, st, shared, done)
		c.Events = true
		return c
	}
	ran := 0
	b.Note(ev("pay", "m1", Queued, false, nil))
	b.Note(ev("pay", "m1", Started, false, nil))
	b.Note(ev("erp", "d1", Queued, true, nil))
	final := ev("pay", "m1", Succeeded, false, func() { ran++ })
	final.ReplyTo = "reply.m1"
	b.Note(final)
	if got, want := tell.list(), "[event m1 queued event m1 started event m1 succeeded]"; got != want || ran != 0 {
		t.Fatalf("told at Note %s, want %s; Done ran %d times", got, want, ran)
	}
	if b.Waiting() != 2 { // the memory job's outcome and Done, the shared change
		t.Fatalf("%d changes waiting, want 2", b.Waiting())
	}
	_ = b.round(context.Background()) // the shared store is down
	want := "[event m1 queued event m1 started event m1 succeeded outcome m1 succeeded on reply.m1]"
	if got := tell.list(); got != want || ran != 1 || b.Waiting() != 1 {
		t.Fatalf("told %s, want %s; Done ran %d times, %d waiting", got, want, ran, b.Waiting())
	}
	shared.setDown(false)
	if err := b.round(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := tell.list(); got != want[:len(want)-1]+" event d1 queued]" {
		t.Fatalf("told %s once the shared store is up", got)
	}
	if fmt.Sprint(events) != "[pay queued pay started pay succeeded erp queued]" {
		t.Fatalf("observer told of %v", events)
	}
}
