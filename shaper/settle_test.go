package shaper

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/outcome"
)

// ackQueue is a memory queue that plays a durable one's queue.Settler:
// it notes when each job was acked.
type ackQueue struct {
	*queue.Bucket
	t0 time.Time

	mu    sync.Mutex
	acked map[string]time.Duration // by job id, since t0
}

func (q *ackQueue) Ack(job *queue.Job, _ time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.acked[job.ID] = time.Since(q.t0)
}

func (q *ackQueue) GiveUp(job *queue.Job) { q.Ack(job, time.Time{}) }

func (q *ackQueue) Keep(*queue.Job) bool { return true }

func (q *ackQueue) ackedAt(id string) (time.Duration, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	d, ok := q.acked[id]
	return d, ok
}

// switchStore is a shared outcome.Store that refuses while down and notes
// when each job's final record was stored.
type switchStore struct {
	*outcome.Memory
	t0 time.Time

	mu     sync.Mutex
	down   bool
	stored map[string]time.Duration // final records, by job id, since t0
}

func (s *switchStore) Put(ctx context.Context, entries []outcome.Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return errors.New("store unreachable")
	}
	for _, e := range entries {
		if e.Record.State.Final() {
			s.stored[e.Record.JobID] = time.Since(s.t0)
		}
	}
	return s.Memory.Put(ctx, entries)
}

func (s *switchStore) setDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

func (s *switchStore) storedAt(id string) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.stored[id]
	return d, ok
}

// A durable job is acked once its final record is stored, so that an
// instance that crashes before leaves it queued and the next sends its
// outcome; with the record store down the ack waits settleWithin at most,
// and not at all once the store is known to be failing.
func TestDurableAckWaitsForTheRecordWithinABound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		store := &switchStore{Memory: outcome.NewMemory(nil), t0: t0, stored: map[string]time.Duration{}}
		book := outcome.NewBook(outcome.NewMemory(nil), store, nil, outcome.Observer{}, nil, func() time.Duration { return time.Second })
		cfg := laneCfg("pay", 1000, 10)
		cfg.Durable = true
		cfg.Outcomes = OutcomeSettings{Keep: time.Hour}
		q := &ackQueue{Bucket: queue.NewBucket(queueSettings(cfg)), t0: t0, acked: map[string]time.Duration{}}
		release := make(chan struct{})
		sink := newRecSink(func(_ context.Context, job *queue.Job) error {
			if job.ID == "down" {
				<-release // the store goes down while it is delivered
			}
			return nil
		})
		sh, err := New(Settings{Lanes: []LaneSettings{cfg}}, Deps{
			Sinks:    func(LaneSettings) (Sink, error) { return sink, nil },
			Queues:   func(LaneSettings) (queue.Roles, error) { return queue.Roles{Queue: q, Memory: q, Settler: q}, nil },
			Outcomes: book, DeadLetter: &recDL{},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- sh.Run(ctx) }()
		defer func() { cancel(); <-done }()
		<-sh.Ready()

		submit := func(id string) {
			t.Helper()
			if rc := sh.Submit(&queue.Job{Downstream: "pay", ID: id}); !rc.Accepted {
				t.Fatalf("%s not accepted: %+v", id, rc)
			}
		}
		// The store up: the ack follows the record.
		submit("up")
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		stored, okS := store.storedAt("up")
		acked, okA := q.ackedAt("up")
		if !okS || !okA || acked < stored {
			t.Fatalf("store up: record stored %v (%v), ack %v (%v); want the ack after the record", stored, okS, acked, okA)
		}
		// The store down: the ack waits settleWithin, no longer.
		submit("down")
		synctest.Wait()
		store.setDown(true)
		start := time.Since(t0)
		close(release)
		time.Sleep(settleWithin / 2)
		synctest.Wait()
		if _, ok := q.ackedAt("down"); ok {
			d, _ := q.ackedAt("down")
			t.Fatalf("store down: the job was acked %v after submit, before its record was stored or settleWithin passed", d-start)
		}
		time.Sleep(settleWithin)
		synctest.Wait()
		acked, okA = q.ackedAt("down")
		if _, ok := store.storedAt("down"); ok || !okA || acked-start > settleWithin+100*time.Millisecond {
			t.Fatalf("store down: acked %v after submit (%v); want within %s, its record not stored yet", acked-start, okA, settleWithin)
		}
		// The store known to fail: acked at once.
		start = time.Since(t0)
		submit("failing")
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if acked, ok := q.ackedAt("failing"); !ok || acked-start > 100*time.Millisecond {
			t.Fatalf("store failing: acked %v after submit (%v); want at once", acked-start, ok)
		}
		// Back up: the records kept are stored.
		store.setDown(false)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		for _, id := range []string{"down", "failing"} {
			if _, ok := store.storedAt(id); !ok {
				t.Errorf("record of %s not stored once the store was back", id)
			}
		}
	})
}

// stuckStore is a shared outcome.Store whose writes hang until release is
// closed: slow, not failing, so the book waits on it.
type stuckStore struct {
	*outcome.Memory
	release chan struct{}
}

func (s *stuckStore) Put(ctx context.Context, entries []outcome.Entry) error {
	select {
	case <-s.release:
		return s.Memory.Put(ctx, entries)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Jobs an instance holds unsettled come back after a crash, as its jobs
// in flight do: while as many as its concurrency wait for their records,
// the lane starts no other, so a record store that hangs slows the drain
// to one job per settleWithin rather than leaving the whole drain unacked.
func TestUnsettledJobsAreBoundedByConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		store := &stuckStore{Memory: outcome.NewMemory(nil), release: make(chan struct{})}
		book := outcome.NewBook(outcome.NewMemory(nil), store, nil, outcome.Observer{}, nil, func() time.Duration { return time.Second })
		cfg := laneCfg("pay", 1000, 10)
		cfg.Durable = true
		cfg.Outcomes = OutcomeSettings{Keep: time.Hour}
		q := &ackQueue{Bucket: queue.NewBucket(queueSettings(cfg)), t0: t0, acked: map[string]time.Duration{}}
		sink := newRecSink(nil)
		sh, err := New(Settings{Lanes: []LaneSettings{cfg}}, Deps{
			Sinks:    func(LaneSettings) (Sink, error) { return sink, nil },
			Queues:   func(LaneSettings) (queue.Roles, error) { return queue.Roles{Queue: q, Memory: q, Settler: q}, nil },
			Outcomes: book, DeadLetter: &recDL{},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- sh.Run(ctx) }()
		defer func() { close(store.release); cancel(); <-done }()
		<-sh.Ready()

		for _, id := range []string{"a", "b", "c"} {
			if rc := sh.Submit(&queue.Job{Downstream: "pay", ID: id}); !rc.Accepted {
				t.Fatalf("%s not accepted: %+v", id, rc)
			}
		}
		time.Sleep(settleWithin / 2)
		synctest.Wait()
		if n := len(sink.all()); n != 1 {
			t.Fatalf("%d jobs started while the first waited for its record; want 1 (concurrency 1)", n)
		}
		time.Sleep(settleWithin)
		synctest.Wait()
		if n := len(sink.all()); n != 2 {
			t.Fatalf("%d jobs started once the first settled after settleWithin; want 2", n)
		}
		if _, ok := q.ackedAt("a"); !ok {
			t.Fatal("the first job was not acked after settleWithin")
		}
	})
}
