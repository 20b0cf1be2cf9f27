package queue

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// placeOK runs st and fails the test unless the job was placed.
func placeOK(t *testing.T, st Stored) {
	t.Helper()
	st.Then(func(_ Placed, err error) {
		if err != nil {
			t.Fatal(err)
		}
	})
}

// TestFairDRROrder: deficit round robin serves keys in turn, each by its
// weight, and costs count against the turn.
func TestFairDRROrder(t *testing.T) {
	q := NewFair(Settings{Capacity: 100, Weights: map[string]int{"a": 3}})
	t0 := time.Unix(0, 0)
	for i := range 6 {
		for _, k := range []string{"a", "b", "c"} {
			placeOK(t, q.Offer(&Job{Key: k, ID: k}, t0.Add(time.Duration(i))))
		}
	}
	placeOK(t, q.Offer(&Job{Key: "c", ID: "C", Cost: 2}, t0))
	var got strings.Builder
	for q.Len() > 0 {
		j, _, ok := q.Take(t0.Add(time.Hour))
		if !ok {
			t.Fatal("Take: nothing")
		}
		got.WriteString(j.ID)
	}
	// a weighs 3; c's cost-2 job waits for two turns' credit.
	if want := "aaabcaaabcbcbcbcbcC"; got.String() != want {
		t.Errorf("order %s, want %s", got.String(), want)
	}
	if q.Cost() != 0 || len(q.levels[0].keys) != 0 || len(q.levels[0].ring) != 0 {
		t.Errorf("after draining: cost %d, keys %d, ring %d", q.Cost(), len(q.levels[0].keys), len(q.levels[0].ring))
	}
}

// TestFairDropFront drops expired jobs at every key's front and keeps the
// turn where it was.
func TestFairDropFront(t *testing.T) {
	q := NewFair(Settings{Capacity: 100})
	t0 := time.Unix(0, 0)
	for _, id := range []string{"a1", "b1", "c1", "a2", "b2", "c2"} {
		placeOK(t, q.Offer(&Job{Key: id[:1], ID: id}, t0))
	}
	dropped := q.DropFront(func(j *Job) bool { return j.ID == "b1" || j.ID == "b2" || j.ID == "c1" })
	if len(dropped) != 3 || q.Len() != 3 || q.Cost() != 3 {
		t.Fatalf("dropped %d, left %d (cost %d)", len(dropped), q.Len(), q.Cost())
	}
	var ids []string
	for q.Len() > 0 {
		j, _, _ := q.Take(t0)
		ids = append(ids, j.ID)
	}
	if want := []string{"a1", "c2", "a2"}; !slices.Equal(ids, want) {
		t.Errorf("order %v, want %v", ids, want)
	}
}
