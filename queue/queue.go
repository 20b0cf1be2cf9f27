package queue

import (
	"errors"
	"time"
)

// ErrFull is reported by Offer when the queue has no room for the job's
// cost: its bound, or the store's (a durable kind), is reached.
var ErrFull = errors.New("queue: full")

// ErrDuplicate is reported by a durable kind's Offer when its store already
// holds a job with the same Job.DedupeID; the kind sets the job's ID to that
// job's id.
var ErrDuplicate = errors.New("queue: duplicate job")

// Queue is one downstream's queue, whatever its kind: Bucket (a bounded
// FIFO), Fair (deficit round robin between keys) or a durable kind
// (package queue/jetstream). The intake side offers jobs under a bound; the
// drain side takes them, and acks, retries or gives up each one it took.
//
// Every method is called with the owning lane's lock held, so none may
// block on I/O; a durable kind fetches in its own goroutines and sends acks
// and naks without waiting for an answer. The one exception is the Stored
// that Offer returns, which the caller runs after releasing its lock.
type Queue interface {
	// Offer adds job, ready to start from at, and returns how the caller
	// learns where it went. A memory kind places the job at once (or
	// refuses it with ErrFull); a durable kind stores it when the caller
	// runs the returned Stored.
	Offer(job *Job, at time.Time) Stored
	// Fits reports whether need more units of cost fit under the bound now.
	// A kind whose store enforces the bound itself (shared by every
	// instance) answers true and refuses in Stored.
	Fits(need int) bool
	// Ahead is the cost that would start before job if it were offered now:
	// every queued job for a FIFO, an estimate under fairness.
	Ahead(job *Job) int
	// Share is job's key's share of the queue under fairness; a kind
	// without per-key shares returns the zero Share (no limit).
	Share(job *Job) Share

	// NextReady returns when the next job becomes ready to start: the front
	// job's ready time or the earliest retry's, whichever is sooner.
	NextReady() (time.Time, bool)
	// Take removes the job to start at now: a retry whose time has come goes
	// ahead of queued jobs. It returns the job's ready time.
	Take(now time.Time) (*Job, time.Time, bool)
	// Ack reports that a taken job was delivered. A durable kind goes on
	// counting it against the bound until at (the end of the job's drain
	// interval), as a memory lane's level does.
	Ack(job *Job, at time.Time)
	// RetryLater puts a taken job back, ahead of queued jobs once at has
	// passed; pushback says the downstream asked to wait (the try does not
	// count against MaxAttempts). It never refuses: the job was accepted
	// once already, so it may exceed the bound.
	RetryLater(job *Job, at time.Time, pushback bool)
	// Keep hands back a taken job whose delivery was cancelled at
	// shutdown, for the next start after a restart: a durable kind keeps
	// it stored and reports true; a memory kind cannot keep it and reports
	// false (the caller dead-letters it).
	Keep(job *Job) bool
	// GiveUp reports that a job (taken, or removed by DropFront or Drain)
	// is dropped for good, after its dead letter was published (or found
	// impossible), so a durable kind may delete it.
	GiveUp(job *Job)
	// DropFront removes front jobs while drop returns true (a durable kind
	// checks expiry when a start reaches a job, and drops none here).
	DropFront(drop func(*Job) bool) []*Job
	// Drain removes and returns every job held in memory (at shutdown: the
	// shaper dead-letters them). A durable kind hands fetched jobs back to
	// its store and returns none: its jobs stay stored.
	Drain() []*Job

	// Len is the number of jobs queued, retries included (a durable kind:
	// its store's, refreshed in the background).
	Len() int
	// Cost is the sum of the queued jobs' costs (a durable kind counts each
	// job as 1: its store bounds jobs by count).
	Cost() int
	// Held is the number of jobs only this process holds: what a removed
	// lane must still start before it may go. A durable kind holds none.
	Held() int
	// Keys is the number of keys with queued jobs under fairness, else 0.
	Keys() int
	// Cap is the bound.
	Cap() int
	// Configure applies new settings in place; a smaller capacity drops
	// nothing (Offer refuses until below it).
	Configure(s Settings)

	// Start starts the kind's own goroutines, if it has any; ready is
	// called, without the queue's locks held, whenever jobs became ready
	// to take. Called once, before Take.
	Start(ready func())
	// Close stops those goroutines and hands fetched but unstarted jobs
	// back to the store; it waits for the goroutines. Idempotent.
	Close() error
}

// Stored reports where an offered job went (Then). A memory kind's is the
// answer itself, a value that costs no allocation; a durable kind's
// (Later) sends the job to its store.
type Stored struct {
	placed Placed
	err    error
	later  func(done func(Placed, error))
}

// Later is the Stored of a kind that stores elsewhere: Then runs store.
func Later(store func(done func(Placed, error))) Stored { return Stored{later: store} }

// Answer returns the answer when it is known already (a memory kind's),
// with known true; known is false for a kind that must run its store
// (Then).
func (s Stored) Answer() (p Placed, known bool, err error) {
	return s.placed, s.later == nil, s.err
}

// Then calls done exactly once, with the job's place or an error (one
// wrapping ErrFull or ErrDuplicate, or a store's failure). The caller runs
// it after releasing the lock it offered under. For a memory kind, which
// placed the job already, done runs before Then returns; a durable kind
// sends the job to its store, may block while its window of
// unacknowledged stores is full, and calls done from its own goroutine
// once the store answered.
func (s Stored) Then(done func(Placed, error)) {
	if s.later != nil {
		s.later(done)
		return
	}
	done(s.placed, s.err)
}

// Placed is where an accepted job went.
type Placed struct {
	// Position is the job's 1-based place in the queue (a durable kind's is
	// an estimate: its store is shared).
	Position int
	// Ahead is the cost that starts before it.
	Ahead int
}

// placed is the Stored of a job a memory kind placed (or refused) at once.
func placed(p Placed, err error) Stored { return Stored{placed: p, err: err} }

// Share is a key's share of a fair queue (Queue.Share).
type Share struct {
	Held  int // cost the key holds queued
	Limit int // the most it may hold; 0 = no per-key limit
	// Ahead is the cost that starts before enough of the key's own jobs
	// have started to make room for the job asked about (0 when it fits).
	Ahead int
}

// Over reports whether a job of cost c exceeds the share.
func (s Share) Over(c int) bool { return s.Limit > 0 && s.Held+c > s.Limit }

// Settings configure a memory kind (and a durable kind's bound).
type Settings struct {
	// Capacity is the bound, in units of cost.
	Capacity int
	// KeyCapacity bounds the cost one key may hold in a Fair queue;
	// 0 = Capacity.
	KeyCapacity int
	// Weights are a Fair queue's per-key weights (absent, or below 1, =
	// 1), by exact key. Not modified by the queue.
	Weights map[string]int
}
