package queue

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// pickers builds each memory kind as a Picker, for tests that hold for
// both.
var pickers = []struct {
	name string
	new  func(Settings) interface {
		Queue
		Picker
	}
}{
	{"bucket", func(s Settings) interface {
		Queue
		Picker
	} {
		return NewBucket(s)
	}},
	{"fair", func(s Settings) interface {
		Queue
		Picker
	} {
		return NewFair(s)
	}},
}

// capped lets every key start but those listed.
func capped(keys ...string) func(string) bool {
	return func(k string) bool {
		for _, c := range keys {
			if k == c {
				return false
			}
		}
		return true
	}
}

// takeIfIDs takes every job ready at now whose key may start and returns
// their IDs in order.
func takeIfIDs(q Picker, now time.Time, may func(string) bool) string {
	var ids []string
	for j, _, ok := q.TakeIf(now, may); ok; j, _, ok = q.TakeIf(now, may) {
		ids = append(ids, j.ID)
	}
	return strings.Join(ids, " ")
}

// pjob is a job of key and priority level p (-1 = none given).
func pjob(key, id string, p int) *Job { return &Job{ID: id, Key: key, Priority: p + 1} }

// TestPickCappedKeySkipped: a key that may not start is passed over, the
// others start in order, and the passed-over jobs keep their places: once
// the key may start again they are first, in their order.
func TestPickCappedKeySkipped(t *testing.T) {
	for _, kind := range pickers {
		t.Run(kind.name, func(t *testing.T) {
			q := kind.new(Settings{Capacity: 100})
			mustOffer(t, q, t0, keyJob("a", "a1", 1), keyJob("a", "a2", 1), keyJob("b", "b1", 1))
			if at, ok := q.NextReadyIf(capped("a", "b")); ok {
				t.Fatalf("NextReadyIf with every key capped = %v, want none", at)
			}
			if j, _, ok := q.TakeIf(t0, capped("a", "b")); ok {
				t.Fatalf("TakeIf with every key capped took %s", j.ID)
			}
			if at, ok := q.NextReadyIf(capped("a")); !ok || !at.Equal(t0) {
				t.Fatalf("NextReadyIf = %v %v, want %v", at, ok, t0)
			}
			if got := takeIfIDs(q, t0, capped("a")); got != "b1" {
				t.Fatalf("with a capped took %q, want b1", got)
			}
			mustOffer(t, q, sec(1), keyJob("b", "b2", 1))
			if got := mustTake(t, q, sec(1)).ID; got != "a1" { // a is free again: it kept its place
				t.Fatalf("next after a frees = %s, want a1", got)
			}
			want := map[string]string{"bucket": "a2 b2", "fair": "b2 a2"}[kind.name] // FIFO; round robin
			if got := takeIfIDs(q, sec(1), nil); got != want {
				t.Errorf("rest %q, want %q", got, want)
			}
			checkCounts(t, q, "drained", 0, 0)
		})
	}
}

// TestPickRetries: a ready retry of a capped key does not block fresh
// jobs of other keys, nor another key's retry behind it; it is first once
// its key may start.
func TestPickRetries(t *testing.T) {
	for _, kind := range pickers {
		t.Run(kind.name, func(t *testing.T) {
			q := kind.new(Settings{Capacity: 100})
			mustOffer(t, q, t0, keyJob("b", "b1", 1), keyJob("b", "b2", 1))
			q.RetryLater(keyJob("a", "a-retry", 1), t0, false)
			q.RetryLater(keyJob("c", "c-retry", 1), sec(1), false)
			if at, ok := q.NextReadyIf(capped("a", "b")); !ok || !at.Equal(sec(1)) {
				t.Fatalf("NextReadyIf(a, b capped) = %v %v, want c's retry at %v", at, ok, sec(1))
			}
			if got, want := takeIfIDs(q, sec(1), capped("a")), "c-retry b1 b2"; got != want {
				t.Fatalf("with a capped: %q, want %q", got, want)
			}
			if got := takeIfIDs(q, sec(1), nil); got != "a-retry" {
				t.Fatalf("after: %q, want a-retry", got)
			}
		})
	}
}

// TestPickLevels: levels stay strict. A capped key's job in level 0 does
// not block level-0 jobs of other keys, and a level-1 job starts only
// when level 0 has no job that may start.
func TestPickLevels(t *testing.T) {
	for _, kind := range pickers {
		t.Run(kind.name, func(t *testing.T) {
			q := kind.new(Settings{Capacity: 100, Priorities: 2})
			mustOffer(t, q, t0, pjob("a", "a0", 0), pjob("b", "b1", 1), pjob("c", "c0", 0), pjob("a", "a1", 1))
			if got := mustTakeIf(t, q, t0, capped("a")); got != "c0" {
				t.Fatalf("first with a capped = %s, want c0 (level 0, before b1)", got)
			}
			if got := mustTakeIf(t, q, t0, capped("a")); got != "b1" {
				t.Fatalf("second with a capped = %s, want b1 (level 0 holds only a's)", got)
			}
			if got, want := takeIfIDs(q, t0, nil), "a0 a1"; got != want {
				t.Fatalf("after a frees: %q, want %q (a0 kept its place in level 0)", got, want)
			}
		})
	}
}

// TestPickDelayed: a due delayed job of a capped key joins its level but
// is passed over; NextReadyIf then does not report it (no busy wake-up).
func TestPickDelayed(t *testing.T) {
	for _, kind := range pickers {
		t.Run(kind.name, func(t *testing.T) {
			q := kind.new(Settings{Capacity: 100})
			d := keyJob("a", "a-later", 1)
			d.NotBefore = sec(2)
			mustOffer(t, q, t0, d)
			if at, ok := q.NextReadyIf(capped("a")); !ok || !at.Equal(sec(2)) {
				t.Fatalf("NextReadyIf = %v %v, want the instant %v", at, ok, sec(2))
			}
			if j, _, ok := q.TakeIf(sec(2), capped("a")); ok {
				t.Fatalf("took %s of a capped key", j.ID)
			}
			if at, ok := q.NextReadyIf(capped("a")); ok {
				t.Fatalf("NextReadyIf after promotion = %v, want none", at)
			}
			if got := takeIfIDs(q, sec(2), nil); got != "a-later" {
				t.Fatalf("after a frees: %q", got)
			}
		})
	}
}

// TestPickFairCreditNotEarned: under fairness a key passed over earns no
// credit, so once it may start again the round goes on as before: it
// does not get the turns it missed.
func TestPickFairCreditNotEarned(t *testing.T) {
	q := NewFair(Settings{Capacity: 100})
	mustOffer(t, q, t0, keyJobs("a", 6, 1)...)
	mustOffer(t, q, t0, keyJobs("b", 6, 1)...)
	var got []string
	for range 4 { // a is capped: only b starts
		got = append(got, mustTakeIf(t, q, t0, capped("a")))
	}
	for range 4 { // both may: they alternate, a does not catch up
		got = append(got, mustTake(t, q, t0).ID)
	}
	if s, want := strings.Join(got, " "), "b1 b2 b3 b4 a1 b5 a2 b6"; s != want {
		t.Errorf("order %q, want %q", s, want)
	}
}

// TestPickFairCost: a capped key's expensive job does not hold up the
// others; costs are kept.
func TestPickFairCost(t *testing.T) {
	q := NewFair(Settings{Capacity: 100})
	mustOffer(t, q, t0, keyJob("a", "a-big", 5), keyJob("b", "b1", 1), keyJob("b", "b2", 1))
	if got, want := takeIfIDs(q, t0, capped("a")), "b1 b2"; got != want {
		t.Fatalf("with a capped: %q, want %q", got, want)
	}
	checkCounts(t, q, "a's job held", 1, 5)
	if got := mustTake(t, q, t0).ID; got != "a-big" {
		t.Fatalf("after a frees: %s", got)
	}
	checkCounts(t, q, "drained", 0, 0)
}

// TestPickBucketCost: the bucket's cost and FIFO order stay right when a
// job is taken from the middle of its FIFO, across the ring's wrap.
func TestPickBucketCost(t *testing.T) {
	q := NewBucket(Settings{Capacity: 1000})
	for range 10 { // move the ring's head so that removal wraps
		mustOffer(t, q, t0, keyJob("x", "x", 1))
	}
	takeAll(q, t0)
	var want []string
	for i := range 12 {
		k := "b"
		if i%3 == 0 {
			k = "a"
		}
		j := keyJob(k, fmt.Sprint(k, i), 1+i%2)
		mustOffer(t, q, t0, j)
		if k == "b" {
			want = append(want, j.ID)
		}
	}
	if got := takeIfIDs(q, t0, capped("a")); got != strings.Join(want, " ") {
		t.Fatalf("with a capped: %q, want %v", got, want)
	}
	checkCounts(t, q, "a's jobs held", 4, 6) // a0 a3 a6 a9: costs 1 2 1 2
	if got, want := takeIfIDs(q, t0, nil), "a0 a3 a6 a9"; got != want {
		t.Fatalf("after a frees: %q, want %q", got, want)
	}
	checkCounts(t, q, "drained", 0, 0)
}

// mustTakeIf takes the next job whose key may start at now.
func mustTakeIf(t testing.TB, q Picker, now time.Time, may func(string) bool) string {
	t.Helper()
	j, _, ok := q.TakeIf(now, may)
	if !ok {
		t.Fatalf("TakeIf(%v): nothing ready", now)
	}
	return j.ID
}
