package queue

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// memoryKinds builds each memory kind with s, for tests that hold for both.
var memoryKinds = []struct {
	name string
	new  func(Settings) Queue
}{
	{"bucket", func(s Settings) Queue { return NewBucket(s) }},
	{"fair", func(s Settings) Queue { return NewFair(s) }},
}

// prio is a job of priority level p (-1 = none given), delayed until at
// when at is not zero.
func prio(id string, p int, at time.Time) *Job {
	return &Job{ID: id, Priority: p + 1, NotBefore: at}
}

// takeAll takes every job ready at now and returns their IDs in order.
func takeIDs(q Queue, now time.Time) string {
	var ids []string
	for j, _, ok := q.Take(now); ok; j, _, ok = q.Take(now) {
		ids = append(ids, j.ID)
	}
	return strings.Join(ids, " ")
}

// TestLevelsStrictFIFOWithin: the most urgent level with a ready job goes
// first, FIFO within a level, no priority = the least urgent level, and a
// retry goes first within its level but after a more urgent ready job.
func TestLevelsStrictFIFOWithin(t *testing.T) {
	for _, kind := range memoryKinds {
		t.Run(kind.name, func(t *testing.T) {
			q := kind.new(Settings{Capacity: 100, Priorities: 3})
			mustOffer(t, q, t0, prio("n1", -1, time.Time{}), prio("b1", 1, time.Time{}), prio("n2", 2, time.Time{}),
				prio("a1", 0, time.Time{}), prio("b2", 1, time.Time{}), prio("a2", 0, time.Time{}))
			if got := mustTake(t, q, t0).ID; got != "a1" {
				t.Fatalf("first = %s, want a1", got)
			}
			b1 := prio("b-retry", 1, time.Time{})
			q.RetryLater(b1, sec(1), false)
			if got, want := takeIDs(q, sec(1)), "a2 b-retry b1 b2 n1 n2"; got != want {
				t.Errorf("order %q, want %q", got, want)
			}
			if q.Len() != 0 || q.Cost() != 0 {
				t.Errorf("after draining: Len %d, Cost %d", q.Len(), q.Cost())
			}
		})
	}
}

// TestLevelsPlaced: position and Ahead count the more urgent levels and
// the job's own level ahead of it, not the less urgent ones.
func TestLevelsPlaced(t *testing.T) {
	for _, kind := range memoryKinds {
		t.Run(kind.name, func(t *testing.T) {
			q := kind.new(Settings{Capacity: 100, Priorities: 3})
			for i := range 20 {
				mustOffer(t, q, t0, prio(string(rune('a'+i)), -1, time.Time{}))
			}
			steps := []struct {
				job  *Job
				want Placed
			}{
				{prio("u1", 0, time.Time{}), Placed{Position: 1, Ahead: 0}},
				{prio("m1", 1, time.Time{}), Placed{Position: 2, Ahead: 1}},
				{prio("u2", 0, time.Time{}), Placed{Position: 2, Ahead: 1}},
				{prio("n", 2, time.Time{}), Placed{Position: 24, Ahead: 23}},
			}
			for _, s := range steps {
				if a := q.Ahead(s.job, t0); a != s.want.Ahead {
					t.Errorf("%s: Ahead %d, want %d", s.job.ID, a, s.want.Ahead)
				}
				if p, err := offer(t, q, s.job, t0); err != nil || p != s.want {
					t.Errorf("%s: placed %+v, %v; want %+v", s.job.ID, p, err, s.want)
				}
			}
		})
	}
}

// TestDelayed: a delayed job counts against the bound, is not ready
// before its instant, holds up no ready job, makes NextReady name its
// instant, and once due joins its level's FIFO behind the jobs that were
// ready before it and ahead of those offered after its instant.
func TestDelayed(t *testing.T) {
	for _, kind := range memoryKinds {
		t.Run(kind.name, func(t *testing.T) {
			q := kind.new(Settings{Capacity: 3})
			mustOffer(t, q, t0, prio("late", -1, sec(10)))
			if at, ok := q.NextReady(); !ok || !at.Equal(sec(10)) {
				t.Fatalf("NextReady = %v, %v; want the instant, 10 s", at.Sub(t0), ok)
			}
			if _, _, ok := q.Take(sec(9)); ok {
				t.Fatal("a delayed job was taken before its instant")
			}
			mustOffer(t, q, sec(1), prio("now", -1, time.Time{}))
			if at, _ := q.NextReady(); !at.Equal(sec(1)) {
				t.Fatalf("NextReady = %v, want 1 s (the ready job)", at.Sub(t0))
			}
			if got := mustTake(t, q, sec(1)).ID; got != "now" {
				t.Fatalf("took %s, want the ready job", got)
			}
			mustOffer(t, q, sec(2), prio("before", -1, time.Time{}), prio("late2", -1, sec(10)))
			if q.Len() != 3 || q.Cost() != 3 {
				t.Fatalf("Len %d, Cost %d; want 3, 3 (delayed jobs count)", q.Len(), q.Cost())
			}
			if _, err := offer(t, q, prio("over", -1, sec(5)), sec(2)); err != ErrFull {
				t.Fatalf("offer over capacity: %v, want ErrFull", err)
			}
			if got, want := takeIDs(q, sec(11)), "before late late2"; got != want {
				t.Fatalf("order %q, want %q", got, want)
			}
		})
	}
}

// TestDelayedOrder: jobs due at one instant join their level in arrival
// order, after the jobs offered before that instant and before those
// offered after it; a due job of a more urgent level goes first.
func TestDelayedOrder(t *testing.T) {
	for _, kind := range memoryKinds {
		t.Run(kind.name, func(t *testing.T) {
			q := kind.new(Settings{Capacity: 100, Priorities: 2})
			mustOffer(t, q, t0, prio("d1", 1, sec(5)), prio("d2", 1, sec(5)), prio("u", 0, sec(6)), prio("d0", 1, sec(4)))
			mustOffer(t, q, sec(3), prio("r3", 1, time.Time{}))
			mustOffer(t, q, sec(7), prio("r7", 1, time.Time{}))
			if got, want := takeIDs(q, sec(7)), "u r3 d0 d1 d2 r7"; got != want {
				t.Errorf("order %q, want %q", got, want)
			}
		})
	}
}

// TestDelayedPlaced: a delayed job counts the jobs ready by its instant
// in the levels up to its own; an undelayed job does not count delayed
// jobs still to come.
func TestDelayedPlaced(t *testing.T) {
	for _, kind := range memoryKinds {
		t.Run(kind.name, func(t *testing.T) {
			q := kind.new(Settings{Capacity: 100, Priorities: 2})
			mustOffer(t, q, t0, prio("a", 1, time.Time{}), prio("b", 1, time.Time{}),
				prio("u10", 0, sec(10)), prio("n10", 1, sec(10)), prio("n20", 1, sec(20)))
			cases := []struct {
				job  *Job
				want int
			}{
				{prio("now", 1, time.Time{}), 2},
				{prio("at10", 1, sec(10)), 4},
				{prio("at15", 1, sec(15)), 4},
				{prio("urgent15", 0, sec(15)), 1},
				{prio("at30", 1, sec(30)), 5},
			}
			for _, tc := range cases {
				if got := q.Ahead(tc.job, t0); got != tc.want {
					t.Errorf("Ahead(%s) = %d, want %d", tc.job.ID, got, tc.want)
				}
			}
			if p, _ := offer(t, q, prio("x", 1, sec(15)), t0); p.Position != 5 {
				t.Errorf("position %d, want 5", p.Position)
			}
		})
	}
}

// TestDelayedRelease: Release and DropFront handle delayed jobs:
// Release hands them back, DropFront leaves them (they are at no front).
func TestDelayedRelease(t *testing.T) {
	for _, kind := range memoryKinds {
		t.Run(kind.name, func(t *testing.T) {
			q := kind.new(Settings{Capacity: 10, Priorities: 2})
			mustOffer(t, q, t0, prio("d", 0, sec(10)), prio("a", 1, time.Time{}))
			dropped := q.(Memory).DropFront(func(*Job) bool { return true })
			if len(dropped) != 1 || dropped[0].ID != "a" || q.Len() != 1 || q.Cost() != 1 {
				t.Fatalf("DropFront dropped %d, left %d (cost %d)", len(dropped), q.Len(), q.Cost())
			}
			if out := q.Release(); len(out) != 1 || out[0].ID != "d" || q.Len() != 0 || q.Cost() != 0 {
				t.Fatalf("Release = %d jobs, left %d (cost %d)", len(out), q.Len(), q.Cost())
			}
		})
	}
}

// TestRelevel: a new number of levels moves held jobs to their level,
// keeping each level's order; jobs past the levels go to the least
// urgent.
func TestRelevel(t *testing.T) {
	for _, kind := range memoryKinds {
		t.Run(kind.name, func(t *testing.T) {
			q := kind.new(Settings{Capacity: 10, Priorities: 3})
			mustOffer(t, q, t0, prio("c1", 2, time.Time{}), prio("n1", -1, time.Time{}),
				prio("b1", 1, time.Time{}), prio("a1", 0, time.Time{}), prio("c2", 2, time.Time{}))
			q.Configure(Settings{Capacity: 10, Priorities: 2})
			if got, want := takeIDs(q, t0), "a1 b1 c1 n1 c2"; got != want {
				t.Errorf("order %q, want %q", got, want)
			}
		})
	}
}

// TestFairWithinLevel: under fairness the urgent level is served first,
// and round robin between keys applies within each level.
func TestFairWithinLevel(t *testing.T) {
	q := NewFair(Settings{Capacity: 100, Priorities: 2})
	for _, id := range []string{"a1", "a2", "a3", "b1"} {
		j := keyJob(id[:1], id, 1)
		j.Priority = 2
		mustOffer(t, q, t0, j)
	}
	for _, id := range []string{"x1", "x2", "y1"} {
		j := keyJob(id[:1], "U"+id, 1)
		j.Priority = 1
		mustOffer(t, q, t0, j)
	}
	var ids []string
	for j, _, ok := q.Take(t0); ok; j, _, ok = q.Take(t0) {
		ids = append(ids, j.ID)
	}
	if want := []string{"Ux1", "Uy1", "Ux2", "a1", "b1", "a2", "a3"}; !slices.Equal(ids, want) {
		t.Errorf("order %v, want %v", ids, want)
	}
	if q.Keys() != 0 {
		t.Errorf("Keys = %d after draining", q.Keys())
	}
}

// TestFairShareCountsDelayed: a key's delayed jobs count against its
// share.
func TestFairShareCountsDelayed(t *testing.T) {
	q := NewFair(Settings{Capacity: 10, KeyCapacity: 2})
	d := keyJob("k", "d", 1)
	d.NotBefore = sec(10)
	mustOffer(t, q, t0, d, keyJob("k", "r", 1))
	if s := q.Share(keyJob("k", "x", 1)); s.Held != 2 || !s.Over(1) {
		t.Errorf("Share = %+v, want 2 held and over", s)
	}
	if q.Keys() != 1 {
		t.Errorf("Keys = %d, want 1", q.Keys())
	}
}

// TestCounts: jobs per level (retries in their level) and the delayed jobs
// not yet due; a delayed job due by the time asked counts in its level.
func TestCounts(t *testing.T) {
	for _, kind := range memoryKinds {
		t.Run(kind.name, func(t *testing.T) {
			q := kind.new(Settings{Capacity: 100, Priorities: 3})
			mustOffer(t, q, t0, prio("a1", 0, time.Time{}), prio("c1", -1, time.Time{}), prio("c2", 2, time.Time{}),
				prio("b-later", 1, sec(5)), prio("a-later", 0, sec(9)))
			q.RetryLater(prio("b-retry", 1, time.Time{}), sec(3), false)
			c := q.(Counter)
			if c.Levels() != 3 {
				t.Fatalf("Levels = %d, want 3", c.Levels())
			}
			levels := make([]int, 4)
			levels[3] = -1
			if d := c.Counts(sec(1), levels); d != 2 || !slices.Equal(levels, []int{1, 1, 2, -1}) {
				t.Errorf("at 1 s: levels %v delayed %d, want [1 1 2 -1] and 2", levels, d)
			}
			if d := c.Counts(sec(5), levels[:2]); d != 1 || !slices.Equal(levels[:2], []int{1, 2}) {
				t.Errorf("at 5 s: levels %v delayed %d, want [1 2] and 1", levels[:2], d)
			}
			if got, want := takeIDs(q, sec(10)), "a1 a-later b-retry b-later c1 c2"; got != want { // counting moved nothing
				t.Errorf("order after counting: %q, want %q", got, want)
			}
		})
	}
}
