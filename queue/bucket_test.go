package queue

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// t0 is the fixed instant every step table counts from; no test reads the
// clock.
var t0 = time.Unix(1000, 0)

// sec is t0 plus n seconds.
func sec(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }

func job(id string, cost int) *Job         { return &Job{ID: id, Cost: cost} }
func keyJob(key, id string, cost int) *Job { return &Job{ID: id, Key: key, Cost: cost} }

// keyJobs returns n jobs of key, each of cost, with IDs key1..keyN.
func keyJobs(key string, n, cost int) []*Job {
	out := make([]*Job, n)
	for i := range out {
		out[i] = keyJob(key, fmt.Sprint(key, i+1), cost)
	}
	return out
}

// offer offers j, ready at at, and runs the returned Stored. It fails the
// test unless done was called exactly once before the Stored returned: a
// memory kind places (or refuses) the job at once.
func offer(t testing.TB, q Queue, j *Job, at time.Time) (Placed, error) {
	t.Helper()
	var (
		calls int
		p     Placed
		err   error
	)
	q.Offer(j, at).Then(func(pp Placed, e error) { calls++; p, err = pp, e })
	if calls != 1 {
		t.Fatalf("Offer(%s): Stored called done %d times before returning, want 1", j.ID, calls)
	}
	return p, err
}

// mustOffer offers every job, ready at at, and fails on any error.
func mustOffer(t testing.TB, q Queue, at time.Time, jobs ...*Job) {
	t.Helper()
	for _, j := range jobs {
		if _, err := offer(t, q, j, at); err != nil {
			t.Fatalf("Offer(%s, cost %d): %v", j.ID, j.Cost, err)
		}
	}
}

// mustTake takes one job at now and fails unless there is one.
func mustTake(t testing.TB, q Queue, now time.Time) *Job {
	t.Helper()
	j, _, ok := q.Take(now)
	if !ok {
		t.Fatalf("Take(%v): nothing to take", now.Sub(t0))
	}
	return j
}

// takeAll takes jobs at now until Take reports none, and returns their IDs.
func takeAll(q Queue, now time.Time) []string {
	var out []string
	for {
		j, _, ok := q.Take(now)
		if !ok {
			return out
		}
		out = append(out, j.ID)
	}
}

// ids returns the jobs' IDs, sorted when sorted is set (Release promises no
// order).
func ids(jobs []*Job, sorted bool) []string {
	out := make([]string, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	if sorted {
		slices.Sort(out)
	}
	return out
}

// checkCounts fails unless q holds n jobs of total cost c.
func checkCounts(t testing.TB, q Queue, step string, n, c int) {
	t.Helper()
	if q.Len() != n || q.Cost() != c {
		t.Fatalf("%s: Len, Cost = %d, %d; want %d, %d", step, q.Len(), q.Cost(), n, c)
	}
}

func TestBucketBoundByCost(t *testing.T) {
	b := NewBucket(Settings{Capacity: 5})
	steps := []struct {
		name     string
		job      *Job
		wantFull bool
		wantLen  int
		wantCost int
	}{
		{"cost 3 takes 3 units", job("a", 3), false, 1, 3},
		{"cost 3 does not fit the 2 left", job("b", 3), true, 1, 3},
		{"cost 0 counts as 1", job("c", 0), false, 2, 4},
		{"cost 1 fills the last unit", job("d", 1), false, 3, 5},
		{"full refuses cost 1", job("e", 1), true, 3, 5},
	}
	for _, s := range steps {
		_, err := offer(t, b, s.job, t0)
		if s.wantFull != errors.Is(err, ErrFull) || (!s.wantFull && err != nil) {
			t.Fatalf("%s: Offer error %v, want full %v", s.name, err, s.wantFull)
		}
		checkCounts(t, b, s.name, s.wantLen, s.wantCost)
	}
	// The refused jobs changed nothing: only the placed ones come out.
	if got, want := takeAll(b, t0), []string{"a", "c", "d"}; !slices.Equal(got, want) {
		t.Fatalf("taken %v, want %v", got, want)
	}
	checkCounts(t, b, "taken", 0, 0)
}

func TestBucketFits(t *testing.T) {
	cases := []struct {
		name           string
		capacity, held int
		need           int
		want           bool
	}{
		{"nothing needed", 10, 7, 0, true},
		{"exactly the room left", 10, 7, 3, true},
		{"one more than the room", 10, 7, 4, false},
		{"full", 10, 10, 1, false},
		{"more than the capacity", 10, 0, 11, false},
		{"the whole capacity", 10, 0, 10, true},
		{"zero capacity", 0, 0, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBucket(Settings{Capacity: tc.capacity})
			if tc.held > 0 {
				mustOffer(t, b, t0, job("held", tc.held))
			}
			if got := b.Fits(tc.need); got != tc.want {
				t.Fatalf("Fits(%d) holding %d of %d = %v, want %v", tc.need, tc.held, tc.capacity, got, tc.want)
			}
		})
	}
}

// TestBucketBurst is the seed article's burst: 15 jobs into a bucket of 10.
func TestBucketBurst(t *testing.T) {
	b := NewBucket(Settings{Capacity: 10})
	var refused []int
	for i := range 15 {
		_, err := offer(t, b, job(fmt.Sprint(i), 1), t0)
		switch {
		case errors.Is(err, ErrFull):
			refused = append(refused, i)
		case err != nil:
			t.Fatalf("job %d: %v", i, err)
		}
	}
	if want := []int{10, 11, 12, 13, 14}; !slices.Equal(refused, want) {
		t.Fatalf("refused %v, want %v (10 placed, the last 5 ErrFull)", refused, want)
	}
	checkCounts(t, b, "after the burst", 10, 10)
}

func TestBucketPlaced(t *testing.T) {
	b := NewBucket(Settings{Capacity: 20})
	steps := []struct {
		name  string
		retry bool // take the front job and retry it, instead of offering
		job   *Job
		want  Placed
	}{
		{"first job has nothing ahead", false, job("a", 2), Placed{Position: 1, Ahead: 0}},
		{"ahead counts cost, not jobs", false, job("b", 1), Placed{Position: 2, Ahead: 2}},
		{"third", false, job("c", 3), Placed{Position: 3, Ahead: 3}},
		{"after a cost-3 job", false, job("d", 1), Placed{Position: 4, Ahead: 6}},
		{"a held retry", true, nil, Placed{}},
		{"a retry is ahead too", false, job("e", 1), Placed{Position: 5, Ahead: 7}},
	}
	for _, s := range steps {
		if s.retry {
			b.RetryLater(mustTake(t, b, t0), sec(5), false)
			continue
		}
		ahead := b.Ahead(s.job, t0)
		p, err := offer(t, b, s.job, t0)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if p != s.want {
			t.Fatalf("%s: Placed %+v, want %+v", s.name, p, s.want)
		}
		if ahead != s.want.Ahead {
			t.Fatalf("%s: Ahead before Offer = %d, want %d", s.name, ahead, s.want.Ahead)
		}
	}
}

func TestBucketTakeFIFO(t *testing.T) {
	b := NewBucket(Settings{Capacity: 10})
	ready := []time.Time{sec(3), sec(1), sec(2)} // not sorted: a FIFO keeps offer order
	for i, at := range ready {
		mustOffer(t, b, at, job(fmt.Sprint("j", i), 1))
	}
	for i, at := range ready {
		j, got, ok := b.Take(sec(10))
		if !ok || j.ID != fmt.Sprint("j", i) || !got.Equal(at) {
			t.Fatalf("Take %d = %v, %v, %v; want j%d ready at %v", i, j, got.Sub(t0), ok, i, at.Sub(t0))
		}
	}
	if j, at, ok := b.Take(sec(10)); ok || j != nil || !at.IsZero() {
		t.Fatalf("Take on empty = %v, %v, %v; want nil, zero, false", j, at, ok)
	}
}

// TestBucketRetryOrder steps over fixed instants: a retry goes ahead of fresh
// jobs once its time has come and not before; retries are sorted by time,
// equal times in arrival order.
func TestBucketRetryOrder(t *testing.T) {
	b := NewBucket(Settings{Capacity: 10})
	mustOffer(t, b, t0, keyJobs("f", 7, 1)...)
	f1, f2, f3, f4 := mustTake(t, b, t0), mustTake(t, b, t0), mustTake(t, b, t0), mustTake(t, b, t0)
	b.RetryLater(f1, sec(5), false)
	b.RetryLater(f2, sec(3), true)
	b.RetryLater(f3, sec(5), false) // same time as f1, after it
	b.RetryLater(f4, sec(4), false)
	steps := []struct {
		now       time.Time
		wantID    string
		wantReady time.Time
	}{
		{sec(2), "f5", t0},     // no retry due: fresh first
		{sec(3), "f2", sec(3)}, // due at exactly its time
		{sec(3), "f6", t0},     // the next retry (4s) is not due
		{sec(6), "f4", sec(4)}, // overdue retries in time order
		{sec(6), "f1", sec(5)}, // equal times in arrival order
		{sec(6), "f3", sec(5)},
		{sec(6), "f7", t0},
		{sec(6), "", time.Time{}},
	}
	for i, s := range steps {
		j, ready, ok := b.Take(s.now)
		got := ""
		if ok {
			got = j.ID
		}
		if got != s.wantID || !ready.Equal(s.wantReady) {
			t.Fatalf("step %d: Take(%v) = %q ready %v, want %q ready %v", i, s.now.Sub(t0), got, ready.Sub(t0), s.wantID, s.wantReady.Sub(t0))
		}
	}
}

func TestBucketNextReady(t *testing.T) {
	cases := []struct {
		name    string
		fresh   []time.Time
		retries []time.Time
		want    time.Time
		wantOK  bool
	}{
		{"empty", nil, nil, time.Time{}, false},
		{"the front job", []time.Time{sec(2), sec(1)}, nil, sec(2), true},
		{"a retry only", nil, []time.Time{sec(7)}, sec(7), true},
		{"a retry before the front", []time.Time{sec(2)}, []time.Time{sec(1)}, sec(1), true},
		{"the front before a retry", []time.Time{sec(2)}, []time.Time{sec(3)}, sec(2), true},
		{"the earliest retry", []time.Time{sec(9)}, []time.Time{sec(5), sec(4), sec(6)}, sec(4), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBucket(Settings{Capacity: 10})
			for _, at := range tc.fresh {
				mustOffer(t, b, at, job("f", 1))
			}
			for _, at := range tc.retries {
				b.RetryLater(job("r", 1), at, false)
			}
			got, ok := b.NextReady()
			if ok != tc.wantOK || !got.Equal(tc.want) {
				t.Fatalf("NextReady = %v, %v; want %v, %v", got.Sub(t0), ok, tc.want.Sub(t0), tc.wantOK)
			}
		})
	}
}

func TestBucketDropFront(t *testing.T) {
	cases := []struct {
		name        string
		jobs        []*Job
		wantDropped []string
		wantAsked   []string
		wantCost    int      // the retry's 1 included
		wantLeft    []string // taken after, the retry first
	}{
		{"stops at the first job drop refuses",
			[]*Job{job("x1", 2), job("x2", 1), job("k3", 1), job("x4", 1)},
			[]string{"x1", "x2"}, []string{"x1", "x2", "k3"}, 3, []string{"xr", "k3", "x4"}},
		{"front refused drops none",
			[]*Job{job("k1", 1), job("x2", 1)},
			nil, []string{"k1"}, 3, []string{"xr", "k1", "x2"}},
		{"drops every fresh job",
			[]*Job{job("x1", 3), job("x2", 1)},
			[]string{"x1", "x2"}, []string{"x1", "x2"}, 1, []string{"xr"}},
		{"no fresh job", nil, nil, nil, 1, []string{"xr"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBucket(Settings{Capacity: 10})
			mustOffer(t, b, t0, tc.jobs...)
			b.RetryLater(job("xr", 1), sec(1), false) // a retry is no front job
			var asked []string
			dropped := b.DropFront(func(j *Job) bool {
				asked = append(asked, j.ID)
				return j.ID[0] == 'x'
			})
			if got := ids(dropped, false); !slices.Equal(got, tc.wantDropped) {
				t.Fatalf("dropped %v, want %v", got, tc.wantDropped)
			}
			if !slices.Equal(asked, tc.wantAsked) {
				t.Fatalf("drop asked about %v, want %v", asked, tc.wantAsked)
			}
			checkCounts(t, b, "after DropFront", len(tc.wantLeft), tc.wantCost)
			if got := takeAll(b, sec(1)); !slices.Equal(got, tc.wantLeft) {
				t.Fatalf("left %v, want %v", got, tc.wantLeft)
			}
		})
	}
}

func TestBucketZeroValue(t *testing.T) {
	var b Bucket
	for _, c := range []int{0, 1, 5} {
		if _, err := offer(t, &b, job("j", c), t0); !errors.Is(err, ErrFull) {
			t.Fatalf("zero Bucket: Offer(cost %d) error %v, want ErrFull", c, err)
		}
	}
	checkCounts(t, &b, "zero Bucket", 0, 0)
	if b.Cap() != 0 {
		t.Fatalf("zero Bucket: Cap = %d; want 0", b.Cap())
	}
	if _, _, ok := b.Take(t0); ok {
		t.Fatal("zero Bucket: Take ok")
	}
	if _, ok := b.NextReady(); ok {
		t.Fatal("zero Bucket: NextReady ok")
	}
	if got := b.Release(); len(got) != 0 {
		t.Fatalf("zero Bucket: Release = %v", ids(got, false))
	}
}

// storedAllocs is what Offer allocates in the steady state: nothing (a
// memory kind's Stored is a value).
const storedAllocs = 0

func TestBucketSteadyStateAllocs(t *testing.T) {
	const depth = 1000
	b := NewBucket(Settings{Capacity: 2 * depth})
	j := job("j", 1)
	for range 2 * depth { // warm-up: grow the ring past what the runs use
		mustOffer(t, b, t0, j)
	}
	done := func(Placed, error) {}
	// AllocsPerRun runs f once more than asked, to warm up.
	if a := testing.AllocsPerRun(depth-1, func() { b.Take(t0) }); a != 0 {
		t.Errorf("allocs per Take = %v, want 0", a)
	}
	if a := testing.AllocsPerRun(depth, func() { b.Offer(j, t0).Then(done); b.Take(t0) }); a != storedAllocs {
		t.Errorf("allocs per Offer+Take = %v, want %d (storedAllocs)", a, storedAllocs)
	}
	big := job("big", 3*depth)
	if a := testing.AllocsPerRun(depth, func() { b.Offer(big, t0).Then(done) }); a != storedAllocs {
		t.Errorf("allocs per refused Offer = %v, want %d (storedAllocs)", a, storedAllocs)
	}
}

// The suite below runs over every memory kind, for what they share.

// memoryQueue is what the suite uses of a memory kind: the Queue every kind
// is, and the Memory role both memory kinds play.
type memoryQueue interface {
	Queue
	Memory
}

// kinds are the memory kinds behind Queue.
var kinds = []struct {
	name string
	new  func(Settings) memoryQueue
}{
	{"Bucket", func(s Settings) memoryQueue { return NewBucket(s) }},
	{"Fair", func(s Settings) memoryQueue { return NewFair(s) }},
}

// runTest runs fn once for each memory kind (uber ratelimit's runTest).
func runTest(t *testing.T, fn func(t *testing.T, newQueue func(Settings) memoryQueue)) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) { fn(t, k.new) })
	}
}

func TestQueueBound(t *testing.T) {
	runTest(t, func(t *testing.T, newQueue func(Settings) memoryQueue) {
		q := newQueue(Settings{Capacity: 4})
		if q.Cap() != 4 {
			t.Fatalf("Cap = %d, want 4", q.Cap())
		}
		steps := []struct {
			name     string
			job      *Job
			wantFull bool
			wantLen  int
			wantCost int
		}{
			{"cost 2", keyJob("a", "a1", 2), false, 1, 2},
			{"cost 3 does not fit the 2 left", keyJob("b", "b1", 3), true, 1, 2},
			{"cost 2 fills it", keyJob("b", "b2", 2), false, 2, 4},
			{"full refuses cost 1", keyJob("a", "a2", 1), true, 2, 4},
			{"full refuses cost 0", keyJob("c", "c1", 0), true, 2, 4},
		}
		for _, s := range steps {
			fits := q.Fits(JobCost(s.job))
			_, err := offer(t, q, s.job, t0)
			if s.wantFull != errors.Is(err, ErrFull) || (!s.wantFull && err != nil) {
				t.Fatalf("%s: Offer error %v, want full %v", s.name, err, s.wantFull)
			}
			if fits == s.wantFull {
				t.Fatalf("%s: Fits(%d) = %v before Offer", s.name, JobCost(s.job), fits)
			}
			checkCounts(t, q, s.name, s.wantLen, s.wantCost)
		}
		if got := ids([]*Job{mustTake(t, q, t0), mustTake(t, q, t0)}, true); !slices.Equal(got, []string{"a1", "b2"}) {
			t.Fatalf("taken %v, want a1 and b2", got)
		}
	})
}

func TestQueueStoredSynchronous(t *testing.T) {
	runTest(t, func(t *testing.T, newQueue func(Settings) memoryQueue) {
		for _, tc := range []struct {
			name     string
			capacity int
			wantErr  error
			wantLen  int
		}{
			{"placed", 1, nil, 1},
			{"refused", 0, ErrFull, 0},
		} {
			q := newQueue(Settings{Capacity: tc.capacity})
			st := q.Offer(job("j", 1), t0)
			if q.Len() != tc.wantLen { // placed before the Stored runs
				t.Fatalf("%s: Len before Stored = %d, want %d", tc.name, q.Len(), tc.wantLen)
			}
			calls := 0
			st.Then(func(p Placed, err error) {
				calls++
				if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
					t.Errorf("%s: done error %v, want %v", tc.name, err, tc.wantErr)
				}
				if err != nil && p != (Placed{}) {
					t.Errorf("%s: refused job Placed %+v, want zero", tc.name, p)
				}
			})
			if calls != 1 {
				t.Fatalf("%s: done called %d times before Stored returned, want 1", tc.name, calls)
			}
		}
	})
}

func TestQueueRetriesFirst(t *testing.T) {
	runTest(t, func(t *testing.T, newQueue func(Settings) memoryQueue) {
		q := newQueue(Settings{Capacity: 10})
		mustOffer(t, q, t0, keyJobs("f", 4, 1)...)
		q.RetryLater(mustTake(t, q, t0), sec(5), false)
		q.RetryLater(mustTake(t, q, t0), sec(5), true) // a pushback waits the same way
		steps := []struct {
			now       time.Time
			wantID    string
			wantReady time.Time
		}{
			{sec(4), "f3", t0},
			{sec(5), "f1", sec(5)},
			{sec(5), "f2", sec(5)},
			{sec(5), "f4", t0},
			{sec(5), "", time.Time{}},
		}
		for i, s := range steps {
			j, ready, ok := q.Take(s.now)
			got := ""
			if ok {
				got = j.ID
			}
			if got != s.wantID || !ready.Equal(s.wantReady) {
				t.Fatalf("step %d: Take(%v) = %q ready %v, want %q ready %v", i, s.now.Sub(t0), got, ready.Sub(t0), s.wantID, s.wantReady.Sub(t0))
			}
		}
	})
}

func TestQueueRetryExceedsBound(t *testing.T) {
	runTest(t, func(t *testing.T, newQueue func(Settings) memoryQueue) {
		q := newQueue(Settings{Capacity: 2})
		mustOffer(t, q, t0, job("a", 1), job("b", 1))
		a := mustTake(t, q, t0)
		mustOffer(t, q, t0, job("c", 1))
		q.RetryLater(a, sec(1), false) // never refused
		checkCounts(t, q, "retry over the bound", 3, 3)
		if q.Fits(0) || q.Fits(1) {
			t.Fatal("Fits over the bound")
		}
		if _, err := offer(t, q, job("d", 1), t0); !errors.Is(err, ErrFull) {
			t.Fatalf("Offer over the bound: %v, want ErrFull", err)
		}
		if got, want := takeAll(q, sec(1)), []string{"a", "b", "c"}; !slices.Equal(got, want) {
			t.Fatalf("taken %v, want %v", got, want)
		}
	})
}

func TestQueueConfigureShrink(t *testing.T) {
	runTest(t, func(t *testing.T, newQueue func(Settings) memoryQueue) {
		q := newQueue(Settings{Capacity: 5})
		mustOffer(t, q, t0, keyJobs("a", 3, 1)...)
		mustOffer(t, q, t0, keyJobs("b", 2, 1)...)
		q.Configure(Settings{Capacity: 2})
		if q.Cap() != 2 {
			t.Fatalf("Cap = %d, want 2", q.Cap())
		}
		checkCounts(t, q, "shrunk", 5, 5) // dropped nothing
		steps := []struct {
			name     string
			take     bool
			wantFull bool
			wantCost int
		}{
			{"over the new bound", false, true, 5},
			{"take", true, false, 4},
			{"take", true, false, 3},
			{"take", true, false, 2},
			{"at the new bound", false, true, 2},
			{"take", true, false, 1},
			{"below the new bound", false, false, 2},
			{"at it again", false, true, 2},
		}
		for i, s := range steps {
			if s.take {
				mustTake(t, q, t0)
			} else if _, err := offer(t, q, keyJob("c", "c", 1), t0); s.wantFull != errors.Is(err, ErrFull) || (!s.wantFull && err != nil) {
				t.Fatalf("step %d %s: Offer error %v, want full %v", i, s.name, err, s.wantFull)
			}
			if q.Cost() != s.wantCost {
				t.Fatalf("step %d %s: Cost = %d, want %d", i, s.name, q.Cost(), s.wantCost)
			}
		}
		q.Configure(Settings{Capacity: -1})
		if q.Cap() != 0 {
			t.Fatalf("Configure(Capacity -1): Cap = %d, want 0", q.Cap())
		}
	})
}

func TestQueueCounts(t *testing.T) {
	runTest(t, func(t *testing.T, newQueue func(Settings) memoryQueue) {
		q := newQueue(Settings{Capacity: 10})
		var taken *Job
		steps := []struct {
			name     string
			op       func()
			wantLen  int
			wantCost int
		}{
			{"empty", func() {}, 0, 0},
			{"offer cost 1", func() { mustOffer(t, q, t0, keyJob("a", "a1", 1)) }, 1, 1},
			{"offer cost 2, another key", func() { mustOffer(t, q, t0, keyJob("b", "b1", 2)) }, 2, 3},
			{"offer cost 0", func() { mustOffer(t, q, t0, keyJob("b", "b2", 0)) }, 3, 4},
			{"take a1", func() { taken = mustTake(t, q, t0) }, 2, 3},
			{"retry it", func() { q.RetryLater(taken, sec(1), false) }, 3, 4},
			{"take the retry", func() { taken = mustTake(t, q, sec(1)) }, 2, 3},
			{"drop every fresh job", func() { q.DropFront(func(*Job) bool { return true }) }, 0, 0},
			{"retry again", func() { q.RetryLater(taken, sec(2), true) }, 1, 1},
			{"release", func() { q.Release() }, 0, 0},
		}
		for _, s := range steps {
			s.op()
			checkCounts(t, q, s.name, s.wantLen, s.wantCost)
		}
		if taken.ID != "a1" {
			t.Fatalf("took %s first, want a1", taken.ID)
		}
	})
}

func TestQueueRelease(t *testing.T) {
	runTest(t, func(t *testing.T, newQueue func(Settings) memoryQueue) {
		q := newQueue(Settings{Capacity: 6})
		mustOffer(t, q, t0, keyJob("a", "a1", 1), keyJob("b", "b1", 2), keyJob("a", "a2", 1), keyJob("c", "c1", 1))
		q.RetryLater(mustTake(t, q, t0), sec(9), false)
		got := ids(q.Release(), true)
		if want := []string{"a1", "a2", "b1", "c1"}; !slices.Equal(got, want) {
			t.Fatalf("Release = %v, want %v (retries and fresh jobs)", got, want)
		}
		checkCounts(t, q, "drained", 0, 0)
		if _, ok := q.NextReady(); ok {
			t.Fatal("NextReady after Release ok")
		}
		if j, _, ok := q.Take(sec(9)); ok {
			t.Fatalf("Take after Release = %s", j.ID)
		}
		if again := q.Release(); len(again) != 0 {
			t.Fatalf("second Release = %v", ids(again, false))
		}
		mustOffer(t, q, t0, job("full", 6)) // the bound is kept, and all free again
		if q.Cap() != 6 || q.Fits(1) {
			t.Fatalf("after Release: Cap %d, Fits(1) %v; want 6, false", q.Cap(), q.Fits(1))
		}
	})
}

// The benchmarks offer and take one job per op at a fixed queue depth,
// serially and, under one sync.Mutex as a lane holds it, from
// GOMAXPROCS goroutines (STYLE: sweep contention for Offer and Poll).

var benchDepths = []int{0, 100}

// benchJobs returns one job for each of keys keys.
func benchJobs(keys int) []*Job {
	out := make([]*Job, keys)
	for i := range out {
		out[i] = keyJob(fmt.Sprint("k", i), fmt.Sprint("j", i), 1)
	}
	return out
}

// benchQueue returns a queue from newQueue, filled to depth from jobs.
func benchQueue(b *testing.B, newQueue func(Settings) memoryQueue, jobs []*Job, depth int) Queue {
	q := newQueue(Settings{Capacity: depth + 1})
	for i := range depth {
		mustOffer(b, q, t0, jobs[i%len(jobs)])
	}
	return q
}

func benchSerial(b *testing.B, newQueue func(Settings) memoryQueue, jobs []*Job, depth int) {
	q := benchQueue(b, newQueue, jobs, depth)
	var err error
	done := func(_ Placed, e error) { err = e }
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		q.Offer(jobs[i%len(jobs)], t0).Then(done)
		q.Take(t0)
		i++
	}
	if err != nil {
		b.Fatal(err)
	}
}

func benchParallel(b *testing.B, newQueue func(Settings) memoryQueue, jobs []*Job, depth int) {
	q := benchQueue(b, newQueue, jobs, depth)
	var mu sync.Mutex
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var err error
		done := func(_ Placed, e error) { err = e }
		i := 0
		for pb.Next() {
			j := jobs[i%len(jobs)]
			i++
			mu.Lock()
			q.Offer(j, t0).Then(done)
			q.Take(t0)
			mu.Unlock()
		}
		if err != nil {
			b.Error(err)
		}
	})
}

// benchKind runs the serial and parallel benchmarks at every depth.
func benchKind(b *testing.B, newQueue func(Settings) memoryQueue, keys int) {
	jobs := benchJobs(keys)
	for _, depth := range benchDepths {
		b.Run(fmt.Sprintf("serial/depth=%d", depth), func(b *testing.B) { benchSerial(b, newQueue, jobs, depth) })
		b.Run(fmt.Sprintf("parallel/depth=%d", depth), func(b *testing.B) { benchParallel(b, newQueue, jobs, depth) })
	}
}

func BenchmarkBucket(b *testing.B) {
	benchKind(b, func(s Settings) memoryQueue { return NewBucket(s) }, 1)
}
