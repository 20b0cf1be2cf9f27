package shaper

import (
	"time"

	"github.com/shaperd/shaper/queue"
)

// Queue is what a lane needs from its queue: enqueue with a bound on the
// intake side; take / ack / retry-later / give-up on the drain side. The
// in-memory queue below is the default; a durable backend (package jsqueue,
// JetStream) maps Take to a fetched message, Ack to an ack, RetryLater to a
// delayed nak and GiveUp to a term, and also implements DurableQueue.
//
// Methods are called with the owning lane's mutex held, so they must not
// block on I/O: a durable backend fetches in its own goroutine and sends
// acks and naks without waiting for an answer.
type Queue interface {
	// Enqueue adds job, ready to start from at, or returns queue.ErrFull
	// when Len() >= Cap(). A DurableQueue is never given jobs this way.
	Enqueue(job *Job, at time.Time) error
	// NextReady returns when the next job becomes ready to start: the front
	// job's ready time or the earliest retry's, whichever is sooner.
	NextReady() (time.Time, bool)
	// Take removes the job to start at now: a retry whose time has come goes
	// ahead of queued jobs. It returns the job's ready time.
	Take(now time.Time) (*Job, time.Time, bool)
	// Ack reports that a taken job was delivered.
	Ack(job *Job)
	// RetryLater puts a taken job back, ahead of queued jobs once at has
	// passed; pushback says the downstream asked to wait (the try does not
	// count against MaxAttempts). It never refuses: the job was accepted
	// once already, so it may exceed the bound.
	RetryLater(job *Job, at time.Time, pushback bool)
	// GiveUp reports that a job (taken, or removed with DropFront / Drain)
	// is dropped for good. The shaper calls it after the job's dead letter
	// was published (or found impossible), so a durable queue may delete it.
	GiveUp(job *Job)
	// DropFront removes front jobs while drop returns true.
	DropFront(drop func(*Job) bool) []*Job
	// Drain removes and returns every held job (at shutdown: the shaper
	// dead-letters them). A durable queue returns none: its jobs stay stored.
	Drain() []*Job
	Len() int
	Cap() int
	SetCap(n int)
}

// DurableQueue is a Queue whose jobs are stored outside the process. Storing
// is I/O, so the lane never enqueues under its lock: Shaper.SubmitFunc calls
// EnqueueAsync after admission, and answers the producer from done.
type DurableQueue interface {
	Queue
	// EnqueueAsync stores job; done is called exactly once, from another
	// goroutine and without any lock held, with the job's 1-based position
	// (an estimate: the store is shared) or an error: one wrapping
	// queue.ErrFull when the store refused for capacity. It may block
	// while its bounded window of unacknowledged stores is full.
	EnqueueAsync(job *Job, done func(position int, err error))
	// Bind starts the queue's own goroutines; ready is called (without the
	// queue's locks held) whenever jobs became ready to take. Called once,
	// before any other method but EnqueueAsync.
	Bind(ready func())
	// Close stops fetching and hands back jobs fetched but not started; it
	// waits for the queue's goroutines. Jobs in flight may still be acked,
	// and acks held by AckAt are sent at once.
	Close() error
	// AckAt is Ack, sent no earlier than at: the end of the delivered job's
	// slot, so that the store goes on counting the job against the bound
	// for as long as the memory queue's level does.
	AckAt(job *Job, at time.Time)
}

// entry is a held job and the time it becomes ready to start.
type entry struct {
	job *Job
	at  time.Time
}

// memQueue is the in-memory Queue: a queue.Bucket for fresh jobs and a
// small slice, sorted by time, for retries waiting out their backoff.
// Not safe for concurrent use (the lane's mutex guards it).
type memQueue struct {
	fifo    *queue.Bucket[entry]
	retries retryList
	cost    int // sum of the held jobs' costs
}

// newLaneQueue is the in-memory queue cfg asks for: FIFO, or fair between
// keys.
func newLaneQueue(cfg LaneSettings) Queue {
	if cfg.Fairness {
		return newFairQueue(cfg)
	}
	return newMemQueue(cfg.Capacity)
}

func newMemQueue(capacity int) *memQueue {
	return &memQueue{fifo: queue.NewBucket[entry](capacity)}
}

func (q *memQueue) Len() int     { return q.fifo.Len() + len(q.retries) }
func (q *memQueue) CostLen() int { return q.cost }
func (q *memQueue) Cap() int     { return q.fifo.Cap() }
func (q *memQueue) SetCap(n int) { q.fifo.SetCap(n) }
func (q *memQueue) Ack(*Job)     {}
func (q *memQueue) GiveUp(*Job)  {}

func (q *memQueue) Enqueue(job *Job, at time.Time) error {
	if q.cost+jobCost(job) > q.Cap() {
		return queue.ErrFull
	}
	if err := q.fifo.Offer(entry{job, at}); err != nil {
		return err
	}
	q.cost += jobCost(job)
	return nil
}

func (q *memQueue) NextReady() (time.Time, bool) {
	front, ok := q.fifo.Peek()
	return q.retries.before(front.at, ok)
}

func (q *memQueue) Take(now time.Time) (*Job, time.Time, bool) {
	if e, ok := q.retries.popReady(now); ok {
		q.cost -= jobCost(e.job)
		return e.job, e.at, true
	}
	e, ok := q.fifo.Poll()
	if ok {
		q.cost -= jobCost(e.job)
	}
	return e.job, e.at, ok
}

func (q *memQueue) RetryLater(job *Job, at time.Time, _ bool) {
	q.cost += jobCost(job)
	q.retries.add(job, at)
}

func (q *memQueue) DropFront(drop func(*Job) bool) []*Job {
	var out []*Job
	for {
		e, ok := q.fifo.Peek()
		if !ok || !drop(e.job) {
			return out
		}
		q.fifo.Poll()
		q.cost -= jobCost(e.job)
		out = append(out, e.job)
	}
}

func (q *memQueue) Drain() []*Job {
	out := make([]*Job, 0, q.Len())
	for _, e := range q.retries {
		out = append(out, e.job)
	}
	q.retries, q.cost = nil, 0
	for e, ok := q.fifo.Poll(); ok; e, ok = q.fifo.Poll() {
		out = append(out, e.job)
	}
	return out
}

// retryList holds the jobs waiting out a retry backoff, sorted by the time
// they become ready (equal times in arrival order), so sorted insertion into
// a slice is enough: only jobs whose delivery just failed are in it.
type retryList []entry

// add inserts job, ready at at.
func (r *retryList) add(job *Job, at time.Time) {
	l := *r
	i := len(l)
	for i > 0 && l[i-1].at.After(at) {
		i--
	}
	l = append(l, entry{})
	copy(l[i+1:], l[i:])
	l[i] = entry{job, at}
	*r = l
}

// popReady removes and returns the first retry if it is ready at now.
func (r *retryList) popReady(now time.Time) (entry, bool) {
	l := *r
	if len(l) == 0 || l[0].at.After(now) {
		return entry{}, false
	}
	e := l[0]
	l[0] = entry{} // let the job be collected
	*r = l[1:]
	return e, true
}

// before returns when the next job is ready: the first retry's time if it
// comes before a fresh job ready at fresh (or there is none, ok false).
func (r retryList) before(fresh time.Time, ok bool) (time.Time, bool) {
	if len(r) > 0 && (!ok || r[0].at.Before(fresh)) {
		return r[0].at, true
	}
	return fresh, ok
}
