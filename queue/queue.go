package queue

import (
	"context"
	"time"
)

// Queue is what every kind does, whatever it is: Bucket (a bounded FIFO),
// Fair (deficit round robin between keys) or a durable kind (package
// queue/jetstream). It is the three parts every kind plays: Intake, Drain
// and Lifecycle. What only some kinds do is a role of its own (Memory,
// Shares, Settler, Service), and Roles carries a kind's queue with the
// roles it plays.
//
// Every method is called with the owning lane's lock held, so none may
// block on I/O; a durable kind fetches in its own goroutines and sends acks
// and naks without waiting for an answer. The one exception is the Stored
// that Offer returns, which the caller runs after releasing its lock.
type Queue interface {
	Intake
	Drain
	Lifecycle
}

// Intake is what the intake side uses of every kind: it offers jobs and
// tells the producer where they went.
type Intake interface {
	// Offer adds job, offered at at and ready to start from then (a
	// delayed job: from its NotBefore), and returns how the caller learns
	// where it went. A memory kind places the job at once (or refuses it
	// with ErrFull); a durable kind stores it when the caller runs the
	// returned Stored.
	Offer(job *Job, at time.Time) Stored
	// Ahead is the cost that would start before job if it were offered at
	// at: the jobs of more urgent levels and those ahead of it in its own
	// (every one for a FIFO, an estimate under fairness), retries
	// included, and the delayed jobs of those levels that are due by the
	// job's own ready instant. A more urgent job that becomes due later,
	// while this one still waits, goes ahead of it too and is not counted,
	// as a more urgent job offered later is not. A durable kind answers
	// its store's depth.
	Ahead(job *Job, at time.Time) int
	// Len is the number of jobs queued, retries included (a durable kind:
	// its store's, refreshed in the background).
	Len() int
	// Cost is the sum of the queued jobs' costs (a durable kind counts each
	// job as 1: its store bounds jobs by count).
	Cost() int
	// Cap is the bound.
	Cap() int
}

// Drain is what the drain side uses of every kind: the lane's scheduler
// asks when the next job is ready, takes it, and puts back one whose try
// failed.
type Drain interface {
	// NextReady returns when the next job becomes ready to start: the
	// earliest of the levels' front jobs' ready times, their retries' and
	// the delayed jobs' instants (so a lane whose queue holds only delayed
	// jobs wakes when the first is due).
	NextReady() (time.Time, bool)
	// Take removes the job to start at now: the most urgent level with a
	// ready job gives it, a retry whose time has come ahead of the level's
	// queued jobs; delayed jobs due by now join the back of their level's
	// FIFO first, in the order of their instants. It returns the job's
	// ready time; ok is false when no job is ready at now.
	Take(now time.Time) (*Job, time.Time, bool)
	// RetryLater puts a taken job back, ahead of queued jobs once at has
	// passed; pushback says the downstream asked to wait (the try does not
	// count against MaxAttempts). It never refuses: the job was accepted
	// once already, so it may exceed the bound.
	RetryLater(job *Job, at time.Time, pushback bool)
}

// Lifecycle is what configuring and stopping a lane uses of every kind.
type Lifecycle interface {
	// Configure applies new settings in place; a smaller capacity drops
	// nothing (Offer refuses until below it).
	Configure(s Settings)
	// Release removes and returns every job held in memory (at shutdown:
	// the shaper dead-letters them). A durable kind stops fetching, hands
	// its fetched jobs back to its store and returns none: its jobs stay
	// stored.
	Release() []*Job
}

// Memory is the role of a kind whose jobs live only in this process
// (Bucket, Fair): the lane bounds them at intake, drops expired jobs that
// hold room, and a removed lane must start (or dead-letter) every one of
// them (Len) before it may go. A kind whose store bounds and keeps its jobs
// (a durable kind) does not play it.
type Memory interface {
	// Fits reports whether need more units of cost fit under the bound now.
	Fits(need int) bool
	// FitsBytes reports whether n more payload bytes fit under the byte
	// bound (Settings.MaxBytes) now; always true without one.
	FitsBytes(n int) bool
	// Bytes is the sum of the held jobs' payload sizes, retries included.
	Bytes() int64
	// DropFront removes front jobs (of each level, and under fairness of
	// each key) while drop returns true; delayed jobs are not at a front.
	DropFront(drop func(*Job) bool) []*Job
	// Withdraw takes back a job Offer placed and nothing took since, as
	// if it had never been offered (an all-or-nothing offer of several
	// jobs, one of which did not fit), and reports whether it was held.
	Withdraw(job *Job) bool
}

// Shares is the role of a kind with fairness between keys (Fair): each
// key holds at most its share of the queue.
type Shares interface {
	// Share is job's key's share of the queue.
	Share(job *Job) Share
	// Keys is the number of keys with queued jobs.
	Keys() int
}

// Settler is the role of a kind that keeps its jobs in a store (a durable
// kind): the drain side settles every job it took with the store. A memory
// kind forgets a job once it is taken, so there is nothing to settle.
type Settler interface {
	// Ack reports that a taken job was delivered. The store goes on
	// counting it against the bound until at (the end of the job's drain
	// interval), as a memory lane's level does.
	Ack(job *Job, at time.Time)
	// Keep hands back a taken job whose delivery was cancelled at
	// shutdown, for the next start after a restart, and reports whether it
	// was kept (else the caller dead-letters it).
	Keep(job *Job) bool
	// GiveUp reports that a taken job is dropped for good, after its dead
	// letter was published (or found impossible), so the store may delete
	// it.
	GiveUp(job *Job)
	// DropFront takes the fetched jobs at the front (of each level, and
	// under fairness of each key), as Memory.DropFront removes them, while
	// drop returns true: each is then taken, to be settled with GiveUp.
	DropFront(drop func(*Job) bool) []*Job
}

// Service is the role of a kind with goroutines of its own (a durable
// kind's fetcher), in the shape every background service of shaperd has
// (package shaper/service): Start, then an idempotent Stop.
type Service interface {
	// Notify sets ready, called without the queue's locks held whenever
	// jobs became ready to take. Called once, before Start.
	Notify(ready func())
	// Start starts the kind's goroutines; ctx bounds the start only.
	// Called once, before Take.
	Start(ctx context.Context) error
	// Stop stops those goroutines and hands fetched but unstarted jobs
	// back to the store; it waits for the goroutines. Idempotent.
	Stop() error
}

// Picker is the role of a kind that can pass over the jobs of a key that
// may not start now (per-key concurrency: the key has its most tries in
// flight) without moving them: both memory kinds, and a durable kind over
// the jobs it has fetched. may reports whether a job
// of key may start; nil = every key may. With a may that allows every key
// they answer as NextReady and Take do. A passed-over job keeps its place:
// once its key may start again it is next among the jobs that may, in the
// order Take serves (levels, retries, fairness, FIFO). A key passed over
// in a fair queue earns no credit while it waits. Each call costs, beyond
// Take's, a look at every job passed over (a fair queue: every key). The
// calls are made under the lane's lock, like every other.
type Picker interface {
	// NextReadyIf is NextReady over the jobs whose key may start; a job
	// whose key may not does not count until its key may (the lane asks
	// again when a try of that key ends).
	NextReadyIf(may func(key string) bool) (time.Time, bool)
	// TakeIf is Take of the first job, in the order Take serves, whose
	// key may start; ok is false when no such job is ready at now.
	TakeIf(now time.Time, may func(key string) bool) (*Job, time.Time, bool)
}

// Counter is the role of a kind that can tell where its jobs wait: how
// many per priority level and how many are delayed. For the operator
// (status, metrics), not for scheduling.
type Counter interface {
	// Counts fills levels (one entry per level, most urgent first; its
	// length is the caller's, entries past the queue's levels are left
	// alone) with the jobs of each level that are ready or waiting out a
	// retry's backoff, and returns the delayed jobs whose instant is after
	// now. A delayed job due by now counts in its level. It does not
	// allocate.
	Counts(now time.Time, levels []int) (delayed int)
	// Levels is the number of priority levels (Settings.Priorities, at
	// least 1).
	Levels() int
}

// Finder is the role of a kind that names each job it stores by its place
// there (a durable kind): offered a job without an ID, it gives the job
// an ID from which it finds the job again while it is stored, and sets
// Job.Named. A stored job's state then needs no record of its own until
// the job is taken. Find is the one method of a kind that may be called
// without the lane's lock, and may block on I/O.
type Finder interface {
	// Find returns the job named id while it is stored; ok is false when
	// the kind never named a job id, or its job is no longer stored. ctx
	// bounds the look-up.
	Find(ctx context.Context, id string) (job *Job, ok bool, err error)
}

// Roles is one downstream's queue as its lane holds it: the Queue every
// kind is, and the roles only some kinds play, nil where the kind does not
// play them. Each kind's Roles method fills in the roles it plays; the
// zero Roles is no queue (the lane builds a memory kind).
type Roles struct {
	Queue
	Memory  Memory  // nil: the jobs are bounded and kept by a store
	Shares  Shares  // nil: no per-key shares
	Settler Settler // nil: a taken job needs no settling
	Service Service // nil: no goroutines of its own
	Picker  Picker  // nil: jobs start in order only (no per-key concurrency)
	Counter Counter // nil: no depth per level (Len only)
	Finder  Finder  // nil: the lane names jobs; a stored job is found by its record
	Atomic  Atomic  // nil: no store of several jobs as one (a memory kind's lane places them under one lock)
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

// Atomic is the role of a kind that stores several jobs as one, all or
// none (a durable kind: the server's atomic batch publish). A memory kind
// does not play it: its lane places a request's jobs under one lock and
// takes them back (Withdraw) when one of them does not fit.
type Atomic interface {
	// OfferAll stores jobs, in order, all or none, as Offer stores one; the
	// caller runs the returned StoredAll after releasing its lock. A job
	// whose DedupeID the store holds already is left out of the rest and
	// answered Placed.Duplicate, its ID set to the stored job's.
	OfferAll(jobs []*Job, at time.Time) StoredAll
	// MaxAll is the most jobs one OfferAll may hold (the store's limit on
	// one atomic batch).
	MaxAll() int
}

// StoredAll reports where an atomic offer's jobs went (Then).
type StoredAll struct {
	later func(done func([]Placed, error))
}

// LaterAll is the StoredAll of a kind that stores elsewhere: Then runs
// store.
func LaterAll(store func(done func([]Placed, error))) StoredAll { return StoredAll{later: store} }

// Then calls done exactly once, with one Placed per job in the offer's
// order, or with an error for all of them (one wrapping ErrFull, or a
// store's failure), and then none was stored. It may block while the
// kind's window of unacknowledged stores is full, and calls done from the
// kind's own goroutine once the store answered.
func (s StoredAll) Then(done func([]Placed, error)) { s.later(done) }

// Placed is where an accepted job went.
type Placed struct {
	// Position is the job's 1-based place in the queue (a durable kind's is
	// an estimate: its store is shared).
	Position int
	// Ahead is the cost that starts before it.
	Ahead int
	// Duplicate is set by Atomic.OfferAll for a job whose DedupeID the
	// store held already (Offer answers ErrDuplicate instead).
	Duplicate bool
}

// placed is the Stored of a job a memory kind placed (or refused) at once.
func placed(p Placed, err error) Stored { return Stored{placed: p, err: err} }

// Share is a key's share of a fair queue (Shares.Share).
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
	// MaxBytes bounds the payload bytes held (len(Job.Payload) summed,
	// retries included); 0 = no byte bound. A smaller bound drops nothing
	// (Offer refuses until below it).
	MaxBytes int64
	// Priorities is the number of priority levels (Job.Priority, Level);
	// below 1 = 1 (no priorities). One Capacity is shared by every level.
	// A change moves held jobs to their new level, keeping their order.
	Priorities int
	// KeyConcurrency is the lane's cap on one key's tries in flight (0 =
	// none). The lane counts them and drains through Picker; a kind only
	// sizes what it holds for it: a durable kind fetches more jobs ahead,
	// so that the drain can pass over a capped key's.
	KeyConcurrency int
	// Rate and Concurrency are the lane's drain in jobs: starts per second
	// and jobs in flight (a lane whose starts carry several jobs counts
	// them all). A durable kind sizes what it fetches ahead by them; 0
	// leaves its sizing as it was.
	Rate        float64
	Concurrency int
}

// levelCount is s's number of priority levels, at least 1.
func (s Settings) levelCount() int { return max(s.Priorities, 1) }
