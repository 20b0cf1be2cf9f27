package jetstream

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaper/queue"
)

// Jobs fetched but not started when the queue stops gracefully are handed
// back without counting a try: after two such stops they start with no
// failures, and their ledger entries are deleted once they leave the
// stream.
func TestGracefulHandBackIsNotATry(t *testing.T) {
	t.Parallel()
	st, js := runStoreWith(t, Settings{PinnedTTL: time.Second, AckWait: time.Second}) // the next drainer is pinned after 1 s
	ls := QueueSettings{Name: "api", Capacity: 10, Rate: 100, Concurrency: 4}
	q := openQueue(t, st, ls)
	storeAll(t, q, job("a", "", 0), job("b", "", 0), job("c", "", 0))
	for range 2 { // fetch, then stop with the jobs held
		startQueue(q, func() {})
		waitHeld(t, q, 3)
		q.Release()
		if err := q.Stop(); err != nil {
			t.Fatal(err)
		}
		q = openQueue(t, st, ls)
	}
	startQueue(q, func() {})
	defer q.Stop()
	var got []string
	for range 3 {
		j := takeWithin(q, 10*time.Second)
		if j == nil || j.Attempt != 0 || j.Failures != 0 {
			t.Fatalf("got %+v, want a job with attempt 0 and no failures", j)
		}
		got = append(got, string(j.Payload))
		q.Ack(j, time.Time{})
	}
	if slices.Sort(got); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("started %v, want a, b and c once each", got)
	}
	// The ledger's stream, not a key listing: entries are deleted as raw
	// messages, and a KV watcher (ListKeys) that counted one before its
	// deletion waits for it forever.
	ledger, err := js.Stream(context.Background(), "KV_"+st.HandbackBucket())
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		info, err := ledger.Info(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d ledger entries left after the jobs left the stream", info.State.Msgs)
		}
	}
}

// A failed try still counts after a hand-back: the ledger takes off only
// the deliveries that were not tries.
func TestLedgerKeepsFailedTries(t *testing.T) {
	t.Parallel()
	st, _ := runStoreWith(t, Settings{PinnedTTL: time.Second, AckWait: time.Second})
	ls := QueueSettings{Name: "api", Capacity: 10, Rate: 100, Concurrency: 4}
	q := openQueue(t, st, ls)
	storeAll(t, q, job("a", "", 0))
	startQueue(q, func() {})
	j := takeWithin(q, 10*time.Second)
	q.RetryLater(j, time.Now(), false) // a failed try
	waitHeld(t, q, 1)
	q.Release()
	_ = q.Stop()
	q = openQueue(t, st, ls)
	startQueue(q, func() {})
	defer q.Stop()
	if j = takeWithin(q, 10*time.Second); j == nil || j.Attempt != 1 || j.Failures != 1 {
		t.Fatalf("got %+v, want the job with its one failed try", j)
	}
}

// A stream of the previous layout (one subject, <SubjectPrefix>.D) is
// migrated in place, its jobs delivered once each, as the least urgent
// level; any other subject set stays incompatible.
func TestMigratePreviousLayout(t *testing.T) {
	t.Parallel()
	st, js := runStore(t)
	ctx := context.Background()
	old := st.streamConfig("api", bounds{capacity: 10})
	old.Subjects = []string{"shaper.queue.api"}
	old.MaxMsgsPerSubject, old.DiscardNewPerSubject = 0, false
	if _, err := js.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"x", "y", "z"} {
		if _, err := js.PublishMsg(ctx, encode("shaper.queue.api", job(name, "", 0))); err != nil {
			t.Fatal(err)
		}
	}
	q := openQueue(t, st, QueueSettings{Name: "api", Capacity: 10, Rate: 100, Concurrency: 1, Priorities: 2})
	storeAll(t, q, job("urgent", "", 1))
	startQueue(q, func() {})
	defer q.Stop()
	waitHeld(t, q, 4)
	got := takeN(t, q, 4)
	if want := []string{"urgent", "x", "y", "z"}; !slices.Equal(got, want) {
		t.Fatalf("starts %v, want %v", got, want)
	}
	s, _ := js.Stream(ctx, "SHAPER_api")
	if subj := s.CachedInfo().Config.Subjects; !slices.Equal(subj, []string{"shaper.queue.api", "shaper.queue.api.>"}) {
		t.Fatalf("subjects %v after the migration", subj)
	}
	if j := takeWithin(q, 300*time.Millisecond); j != nil {
		t.Fatalf("%s delivered again", j.Payload)
	}

	other := st.streamConfig("odd", bounds{capacity: 10})
	other.Subjects = []string{"shaper.queue.odd.x"}
	if _, err := js.CreateStream(ctx, other); err != nil {
		t.Fatal(err)
	}
	err := st.Ensure(ctx, []QueueSettings{{Name: "odd", Capacity: 10}})
	if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "subjects is [shaper.queue.odd.x]") {
		t.Fatalf("Ensure of a stream with other subjects: %v, want ErrIncompatible naming them", err)
	}
}

// Under fairness each key's jobs are on a subject of their own, bounded by
// the server at queue.key_capacity for every instance: a key past it is
// refused with queue.ErrKeyFull, another key is accepted, and a changed
// key capacity updates the stream.
func TestPerKeyBound(t *testing.T) {
	t.Parallel()
	st, js := runStore(t)
	q := openQueue(t, st, QueueSettings{Name: "api", Capacity: 10, Rate: 1, Concurrency: 10, Fairness: true, KeyCapacity: 2})
	storeAll(t, q, job("a0", "flood", 0), job("a1", "flood", 0))
	if _, err := store(q, job("a2", "flood", 0)); !errors.Is(err, queue.ErrKeyFull) || !errors.Is(err, queue.ErrFull) {
		t.Fatalf("third job of a key with key capacity 2: %v, want ErrKeyFull", err)
	}
	storeAll(t, q, job("b0", "quiet", 0), job("e0", "", 0))
	q.Configure(queue.Settings{Capacity: 10, KeyCapacity: 3})
	startQueue(q, func() {})
	defer q.Stop()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s, err := js.Stream(context.Background(), "SHAPER_api")
		if err == nil && s.CachedInfo().Config.MaxMsgsPerSubject == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("max_msgs_per_subject not updated to 3")
		}
	}
	storeAll(t, q, job("a2", "flood", 0))
	waitHeld(t, q, 5)
	if got := strings.Join(takeN(t, q, 5), " "); got != "a0 b0 e0 a1 a2" {
		t.Fatalf("starts %s, want the keys in turn", got)
	}
}

// Counts: per level from the subjects, the delayed jobs the drainer holds
// or handed back out of their levels.
func TestCounts(t *testing.T) {
	t.Parallel()
	st, _ := runStore(t)
	q := openQueue(t, st, QueueSettings{Name: "api", Capacity: 20, Rate: 1, Concurrency: 20, Priorities: 3})
	soon, later := job("soon", "", 1), job("later", "", 3)
	soon.NotBefore, later.NotBefore = time.Now().Add(time.Minute), time.Now().Add(1500*time.Millisecond)
	storeAll(t, q, job("u", "", 1), job("m", "", 2), job("o1", "", 0), job("o2", "", 0), soon, later)
	startQueue(q, func() {})
	defer q.Stop()
	waitHeld(t, q, 5) // soon was handed back to wait in the stream
	levels := make([]int, 3)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		delayed := q.Counts(time.Now(), levels)
		if delayed == 2 && slices.Equal(levels, []int{1, 1, 2}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("counts %v delayed %d, want [1 1 2] and 2", levels, delayed)
		}
	}
	if q.Levels() != 3 {
		t.Fatalf("levels %d, want 3", q.Levels())
	}
	if ahead := q.Ahead(job("x", "", 2), time.Now()); ahead != 2 {
		t.Errorf("ahead of a level-1 job: %d, want 2 (levels 0 and 1; soon, due in a minute, starts after it)", ahead)
	}
}
