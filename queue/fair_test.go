package queue

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// concat joins job lists in offer order.
func concat(lists ...[]*Job) []*Job { return slices.Concat(lists...) }

func TestFairOrder(t *testing.T) {
	cases := []struct {
		name    string
		weights map[string]int
		offers  []*Job
		want    []string
	}{
		{"weights 2 and 1", map[string]int{"a": 2},
			concat(keyJobs("a", 6, 1), keyJobs("b", 6, 1)),
			[]string{"a1", "a2", "b1", "a3", "a4", "b2", "a5", "a6", "b3", "b4", "b5", "b6"}},
		{"weight 3 against two of 1", map[string]int{"c": 3},
			concat(keyJobs("a", 3, 1), keyJobs("b", 3, 1), keyJobs("c", 6, 1)),
			[]string{"a1", "b1", "c1", "c2", "c3", "a2", "b2", "c4", "c5", "c6", "a3", "b3"}},
		{"equal weights take turns", nil,
			concat(keyJobs("a", 2, 1), keyJobs("b", 2, 1), keyJobs("c", 2, 1)),
			[]string{"a1", "b1", "c1", "a2", "b2", "c2"}},
		{"the anonymous key is a key", nil,
			concat(keyJobs("", 2, 1), keyJobs("a", 2, 1)),
			[]string{"1", "a1", "2", "a2"}},
		{"one key is a FIFO", map[string]int{"a": 5},
			keyJobs("a", 4, 1),
			[]string{"a1", "a2", "a3", "a4"}},
		{"weights are by exact key", map[string]int{"A": 3},
			concat(keyJobs("a", 3, 1), keyJobs("b", 3, 1)),
			[]string{"a1", "b1", "a2", "b2", "a3", "b3"}},
		// A cost-2 job needs two rounds of a weight-1 key's credit.
		{"cost 2 needs two rounds of weight 1", nil,
			concat(keyJobs("a", 2, 2), keyJobs("b", 4, 1)),
			[]string{"b1", "a1", "b2", "b3", "a2", "b4"}},
		{"cost 2 in one round of weight 2", map[string]int{"a": 2},
			concat(keyJobs("a", 2, 2), keyJobs("b", 3, 1)),
			[]string{"a1", "b1", "a2", "b2", "b3"}},
		{"cost 3 of weight 1 against cost 1", nil,
			concat(keyJobs("b", 4, 1), keyJobs("a", 1, 3)),
			[]string{"b1", "b2", "b3", "a1", "b4"}},
		{"offers interleaved", map[string]int{"b": 2},
			[]*Job{keyJob("a", "a1", 1), keyJob("b", "b1", 1), keyJob("a", "a2", 1), keyJob("b", "b2", 1), keyJob("b", "b3", 1), keyJob("b", "b4", 1)},
			[]string{"a1", "b1", "b2", "a2", "b3", "b4"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := NewFair(Settings{Capacity: 100, Weights: tc.weights})
			mustOffer(t, q, t0, tc.offers...)
			if got := takeAll(q, t0); !slices.Equal(got, tc.want) {
				t.Fatalf("order %v\n want %v", got, tc.want)
			}
		})
	}
}

// TestFairOrderWhileOffering offers between takes: a key that comes back
// after its sub-queue was deleted waits for its turn.
func TestFairOrderWhileOffering(t *testing.T) {
	q := NewFair(Settings{Capacity: 100})
	mustOffer(t, q, t0, keyJobs("a", 1, 1)...)
	mustOffer(t, q, t0, keyJobs("b", 3, 1)...)
	steps := []struct {
		offer *Job // offered before the take, if any
		want  string
	}{
		{nil, "a1"}, // a is deleted: it is empty
		{keyJob("a", "a2", 1), "b1"},
		{nil, "a2"},
		{keyJob("c", "c1", 1), "b2"},
		{nil, "c1"},
		{nil, "b3"},
	}
	for i, s := range steps {
		if s.offer != nil {
			mustOffer(t, q, t0, s.offer)
		}
		if got := mustTake(t, q, t0).ID; got != s.want {
			t.Fatalf("step %d: took %s, want %s", i, got, s.want)
		}
	}
}

func TestFairKeysDeletedWhenEmpty(t *testing.T) {
	q := NewFair(Settings{Capacity: 10})
	mustOffer(t, q, t0, keyJob("a", "a1", 1), keyJob("b", "b1", 1), keyJob("b", "b2", 1))
	steps := []struct {
		name     string
		op       func()
		wantKeys []string
	}{
		{"two keys", func() {}, []string{"a", "b"}},
		{"a's last job taken", func() { mustTake(t, q, t0) }, []string{"b"}},
		{"b still holds one", func() { mustTake(t, q, t0) }, []string{"b"}},
		{"b's last job taken", func() { mustTake(t, q, t0) }, nil},
		{"a again", func() { mustOffer(t, q, t0, keyJob("a", "a2", 1)) }, []string{"a"}},
		{"a retry holds no sub-queue", func() { q.RetryLater(keyJob("c", "c1", 1), sec(1), false) }, []string{"a"}},
		{"dropped empty", func() { q.DropFront(func(*Job) bool { return true }) }, nil},
	}
	for _, s := range steps {
		s.op()
		var got []string
		for k := range q.levels[0].keys {
			got = append(got, k)
		}
		slices.Sort(got)
		if !slices.Equal(got, s.wantKeys) || q.Keys() != len(s.wantKeys) || len(q.levels[0].ring) != len(s.wantKeys) {
			t.Fatalf("%s: keys %v, Keys() %d, ring %d; want %v", s.name, got, q.Keys(), len(q.levels[0].ring), s.wantKeys)
		}
	}
}

func TestFairBound(t *testing.T) {
	q := NewFair(Settings{Capacity: 4, KeyCapacity: 4})
	steps := []struct {
		name     string
		job      *Job
		wantFull bool
		wantKeys int
		wantCost int
	}{
		{"cost 3 takes 3 units", keyJob("a", "a1", 3), false, 1, 3},
		{"another key's cost 2 does not fit", keyJob("b", "b1", 2), true, 1, 3},
		{"another key's cost 1 fills it", keyJob("b", "b2", 1), false, 2, 4},
		{"full refuses the same key", keyJob("a", "a2", 1), true, 2, 4},
		{"full refuses a new key", keyJob("c", "c1", 0), true, 2, 4},
	}
	for _, s := range steps {
		_, err := offer(t, q, s.job, t0)
		if s.wantFull != errors.Is(err, ErrFull) || (!s.wantFull && err != nil) {
			t.Fatalf("%s: Offer error %v, want full %v", s.name, err, s.wantFull)
		}
		if q.Keys() != s.wantKeys || len(q.levels[0].keys) != s.wantKeys || q.Cost() != s.wantCost {
			t.Fatalf("%s: Keys %d (map %d), Cost %d; want %d, %d", s.name, q.Keys(), len(q.levels[0].keys), q.Cost(), s.wantKeys, s.wantCost)
		}
	}
}

func TestFairShare(t *testing.T) {
	// a holds 3, b (weight 2) holds 4, and a retry of cost 2 waits.
	q := NewFair(Settings{Capacity: 20, KeyCapacity: 4, Weights: map[string]int{"b": 2}})
	mustOffer(t, q, t0, keyJobs("a", 3, 1)...)
	mustOffer(t, q, t0, keyJobs("b", 4, 1)...)
	q.RetryLater(keyJob("r", "r1", 2), sec(1), false)
	cases := []struct {
		name string
		job  *Job
		want Share
		over bool
	}{
		{"fits: nothing ahead", keyJob("a", "x", 1), Share{Held: 3, Limit: 4}, false},
		// One unit of a's must start: the retry, then one round of b's.
		{"over by 1", keyJob("a", "x", 2), Share{Held: 3, Limit: 4, Ahead: 2 + 2}, true},
		// Two units: a's first, the retry, two rounds of b's.
		{"over by 2", keyJob("a", "x", 3), Share{Held: 3, Limit: 4, Ahead: 1 + 2 + 4}, true},
		// b needs one round of its weight 2: the retry, one of a's.
		{"a weighted key over", keyJob("b", "x", 1), Share{Held: 4, Limit: 4, Ahead: 2 + 1}, true},
		{"a new key exactly at its limit", keyJob("c", "x", 4), Share{Held: 0, Limit: 4}, false},
		{"cost 0 counts as 1", keyJob("b", "x", 0), Share{Held: 4, Limit: 4, Ahead: 2 + 1}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := q.Share(tc.job)
			if got != tc.want {
				t.Fatalf("Share = %+v, want %+v", got, tc.want)
			}
			if got.Over(JobCost(tc.job)) != tc.over {
				t.Fatalf("Over(%d) = %v, want %v", JobCost(tc.job), !tc.over, tc.over)
			}
		})
	}
}

func TestFairShareLimit(t *testing.T) {
	cases := []struct {
		name      string
		s         Settings
		wantLimit int
	}{
		{"KeyCapacity", Settings{Capacity: 10, KeyCapacity: 3}, 3},
		{"0 = Capacity", Settings{Capacity: 10}, 10},
		{"0 follows a new Capacity", Settings{Capacity: 7}, 7},
	}
	q := NewFair(Settings{Capacity: 1})
	mustOffer(t, q, t0, keyJob("a", "a1", 1))
	for _, tc := range cases {
		q.Configure(tc.s)
		sh := q.Share(keyJob("a", "x", 1))
		if sh.Limit != tc.wantLimit || sh.Held != 1 {
			t.Fatalf("%s: Share %+v, want Held 1, Limit %d", tc.name, sh, tc.wantLimit)
		}
		if sh.Over(tc.wantLimit-1) || !sh.Over(tc.wantLimit) {
			t.Fatalf("%s: Over wrong at the limit %d holding 1", tc.name, tc.wantLimit)
		}
	}
}

// TestFairAhead checks the estimate of the cost that starts before a job:
// the retries, the key's own queued cost, and what every other key starts in
// the rounds the key needs (its weight per round).
func TestFairAhead(t *testing.T) {
	cases := []struct {
		name    string
		weights map[string]int
		queued  []*Job
		retries []*Job
		job     *Job
		want    int
	}{
		{"empty", nil, nil, nil, keyJob("a", "x", 1), 0},
		{"own jobs only", nil, keyJobs("a", 3, 1), nil, keyJob("a", "x", 1), 3},
		{"one round of another key", nil, keyJobs("b", 5, 1), nil, keyJob("a", "x", 1), 1},
		{"own backlog makes rounds", nil, concat(keyJobs("a", 2, 1), keyJobs("b", 5, 1)), nil, keyJob("a", "x", 1), 2 + 3},
		{"own weight shortens them", map[string]int{"a": 2}, concat(keyJobs("a", 2, 1), keyJobs("b", 5, 1)), nil, keyJob("a", "x", 1), 2 + 2},
		{"another's weight lengthens them", map[string]int{"b": 3}, concat(keyJobs("a", 1, 1), keyJobs("b", 5, 1)), nil, keyJob("a", "x", 1), 1 + 5},
		{"another key gives at most what it holds", nil, concat(keyJobs("a", 3, 1), keyJobs("b", 1, 1)), nil, keyJob("a", "x", 1), 3 + 1},
		{"the job's cost makes rounds", nil, keyJobs("b", 5, 1), nil, keyJob("a", "x", 3), 3},
		{"retries start first", nil, keyJobs("b", 5, 1), []*Job{keyJob("a", "r1", 2), keyJob("c", "r2", 1)}, keyJob("a", "x", 1), 3 + 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := NewFair(Settings{Capacity: 100, Weights: tc.weights})
			mustOffer(t, q, t0, tc.queued...)
			for _, r := range tc.retries {
				q.RetryLater(r, sec(1), false)
			}
			if got := q.Ahead(tc.job, t0); got != tc.want {
				t.Fatalf("Ahead = %d, want %d", got, tc.want)
			}
			p, err := offer(t, q, tc.job, t0)
			if err != nil {
				t.Fatal(err)
			}
			if want := (Placed{Position: q.Len(), Ahead: tc.want}); p != want {
				t.Fatalf("Placed %+v, want %+v", p, want)
			}
		})
	}
}

// TestFairRetriesAheadOfEveryKey steps over fixed instants.
func TestFairRetriesAheadOfEveryKey(t *testing.T) {
	q := NewFair(Settings{Capacity: 10, Weights: map[string]int{"a": 2}})
	mustOffer(t, q, t0, keyJobs("a", 3, 1)...)
	mustOffer(t, q, t0, keyJobs("b", 2, 1)...)
	q.RetryLater(mustTake(t, q, t0), sec(4), false) // a1
	q.RetryLater(keyJob("c", "c1", 1), sec(2), true)
	steps := []struct {
		now    int
		wantID string
	}{
		{1, "a2"}, // no retry due: a's turn goes on
		{2, "c1"}, // due: before b, whose turn it is
		{3, "b1"},
		{4, "a1"},
		{4, "a3"},
		{4, "b2"},
		{4, ""},
	}
	for i, s := range steps {
		j, _, ok := q.Take(sec(s.now))
		got := ""
		if ok {
			got = j.ID
		}
		if got != s.wantID {
			t.Fatalf("step %d: Take(%ds) = %q, want %q", i, s.now, got, s.wantID)
		}
	}
}

func TestFairNextReady(t *testing.T) {
	cases := []struct {
		name    string
		fresh   []int
		retries []int
		want    int
		wantOK  bool
	}{
		{"empty", nil, nil, 0, false},
		{"the front job", []int{2, 1}, nil, 2, true},
		{"a retry only", nil, []int{7}, 7, true},
		{"a retry before the front", []int{2}, []int{1}, 1, true},
		{"the front before a retry", []int{2}, []int{3}, 2, true},
		{"the earliest retry", []int{9}, []int{5, 4, 6}, 4, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := NewFair(Settings{Capacity: 10})
			for _, s := range tc.fresh {
				mustOffer(t, q, sec(s), job("f", 1))
			}
			for _, s := range tc.retries {
				q.RetryLater(keyJob("r", "r", 1), sec(s), false)
			}
			got, ok := q.NextReady()
			if ok != tc.wantOK || (ok && !got.Equal(sec(tc.want))) {
				t.Fatalf("NextReady = %v, %v; want %ds, %v", got.Sub(t0), ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestFairDropFrontAcrossKeys(t *testing.T) {
	cases := []struct {
		name        string
		offers      []*Job
		taken       int // taken before the drop, to move the turn
		wantDropped []string
		wantAsked   []string
		wantKeys    int
		wantCost    int
		wantLeft    []string // taken after, the retry first
	}{
		{"every key's front, stopping at each key's first kept",
			[]*Job{keyJob("a", "xa1", 1), keyJob("a", "xa2", 1), keyJob("a", "ka3", 1), keyJob("b", "xb1", 1),
				keyJob("c", "kc1", 1), keyJob("c", "xc2", 1), keyJob("d", "xd1", 2)},
			0,
			[]string{"xa1", "xa2", "xb1", "xd1"}, []string{"xa1", "xa2", "ka3", "xb1", "kc1", "xd1"},
			2, 4, []string{"xr", "ka3", "kc1", "xc2"}},
		// b is being served when it is dropped empty: c's turn begins.
		{"the key being served dropped empty",
			[]*Job{keyJob("a", "a1", 1), keyJob("a", "a2", 1), keyJob("b", "b1", 1), keyJob("b", "xb2", 1),
				keyJob("b", "xb3", 1), keyJob("c", "c1", 1), keyJob("c", "c2", 1)},
			2, // a1, b1
			[]string{"xb2", "xb3"}, []string{"a2", "xb2", "xb3", "c1"},
			2, 4, []string{"xr", "c1", "a2", "c2"}},
		{"a key before the one served dropped empty",
			[]*Job{keyJob("a", "a1", 1), keyJob("a", "xa2", 1), keyJob("b", "b1", 1), keyJob("b", "b2", 1),
				keyJob("c", "c1", 1), keyJob("c", "c2", 1)},
			2, // a1, b1
			[]string{"xa2"}, []string{"xa2", "b2", "c1"},
			2, 4, []string{"xr", "c1", "b2", "c2"}},
		{"nothing to drop", keyJobs("a", 2, 1), 0, nil, []string{"a1"}, 1, 3, []string{"xr", "a1", "a2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := NewFair(Settings{Capacity: 20})
			mustOffer(t, q, t0, tc.offers...)
			for range tc.taken {
				mustTake(t, q, t0)
			}
			q.RetryLater(keyJob("a", "xr", 1), sec(1), false) // a retry is no front job
			var asked []string
			dropped := q.DropFront(func(j *Job) bool {
				asked = append(asked, j.ID)
				return j.ID[0] == 'x'
			})
			if got := ids(dropped, false); !slices.Equal(got, tc.wantDropped) {
				t.Fatalf("dropped %v, want %v", got, tc.wantDropped)
			}
			if !slices.Equal(asked, tc.wantAsked) {
				t.Fatalf("drop asked about %v, want %v", asked, tc.wantAsked)
			}
			if q.Keys() != tc.wantKeys || len(q.levels[0].keys) != tc.wantKeys {
				t.Fatalf("Keys %d (map %d), want %d", q.Keys(), len(q.levels[0].keys), tc.wantKeys)
			}
			checkCounts(t, q, "after DropFront", len(tc.wantLeft), tc.wantCost)
			if got := takeAll(q, sec(1)); !slices.Equal(got, tc.wantLeft) {
				t.Fatalf("left %v, want %v", got, tc.wantLeft)
			}
		})
	}
}

// TestFairReleaseKeepsSettings: Release empties the queue (TestQueueRelease) but
// keeps its bound, per-key bound and weights.
func TestFairReleaseKeepsSettings(t *testing.T) {
	q := NewFair(Settings{Capacity: 10, KeyCapacity: 5, Weights: map[string]int{"a": 2}})
	mustOffer(t, q, t0, keyJobs("a", 2, 1)...)
	mustOffer(t, q, t0, keyJobs("b", 1, 1)...)
	q.RetryLater(mustTake(t, q, t0), sec(9), false)
	if got := ids(q.Release(), true); !slices.Equal(got, []string{"a1", "a2", "b1"}) {
		t.Fatalf("Release = %v", got)
	}
	if len(q.levels[0].keys) != 0 || len(q.levels[0].ring) != 0 || q.Keys() != 0 {
		t.Fatalf("after Release: keys %d, ring %d", len(q.levels[0].keys), len(q.levels[0].ring))
	}
	if q.Cap() != 10 || q.Share(keyJob("a", "x", 1)).Limit != 5 {
		t.Fatalf("after Release: Cap %d, Limit %d; want 10, 5", q.Cap(), q.Share(keyJob("a", "x", 1)).Limit)
	}
	mustOffer(t, q, t0, concat(keyJobs("a", 3, 1), keyJobs("b", 2, 1))...)
	if got, want := takeAll(q, t0), []string{"a1", "a2", "b1", "a3", "b2"}; !slices.Equal(got, want) {
		t.Fatalf("order after Release %v, want %v", got, want)
	}
}

// TestFairConfigureWeights: a new weight applies to a key with queued jobs
// from its next turn on.
func TestFairConfigureWeights(t *testing.T) {
	q := NewFair(Settings{Capacity: 20})
	mustOffer(t, q, t0, concat(keyJobs("a", 6, 1), keyJobs("b", 6, 1))...)
	if got := takeTwo(t, q); !slices.Equal(got, []string{"a1", "b1"}) {
		t.Fatalf("before Configure %v", got)
	}
	q.Configure(Settings{Capacity: 20, Weights: map[string]int{"a": 3}})
	want := []string{"a2", "a3", "a4", "b2", "a5", "a6", "b3", "b4", "b5", "b6"}
	if got := takeAll(q, t0); !slices.Equal(got, want) {
		t.Fatalf("after Configure %v\n want %v", got, want)
	}
}

// takeTwo takes two jobs.
func takeTwo(t *testing.T, q Queue) []string {
	t.Helper()
	return []string{mustTake(t, q, t0).ID, mustTake(t, q, t0).ID}
}

func BenchmarkFair(b *testing.B) {
	for _, keys := range []int{1, 100} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			benchKind(b, func(s Settings) memoryQueue { return NewFair(s) }, keys)
		})
	}
}
