package jetstream

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/shaperd/shaper/queue"
)

// Tuning of the drain.
const (
	maxPrefetch  = 100
	refreshEvery = 500 * time.Millisecond
	retryEvery   = time.Second
)

// Queue is one downstream's durable queue, a queue.Queue whose jobs are
// stored in the stream: Offer's Stored publishes and waits for the PubAck;
// the drainer promotes the jobs that go next into the window (pro:
// promoter), fetches their tokens and holds them (hold: holdings) in a
// local index of the memory kind its settings name (queue.Bucket, or
// queue.Fair under fairness), so that they start in the memory backend's
// order; Take hands them out, RetryLater naks a token with a delay. It
// settles each job it handed out (queue.Settler: Ack deletes the job and
// acks its token, held to the end of the job's drain interval; GiveUp
// terms; Keep holds), counts the stream's jobs (cnt: counts; queue.Counter)
// and runs goroutines of its own (queue.Service: fetch, promote, maintain,
// keep-alive, from Start until Close); the stream bounds and keeps its
// jobs, so it plays no queue.Memory role. Create it with Store.Queue. Its
// methods are safe for concurrent use and never block on I/O (acks and
// naks are sent without waiting for an answer).
type Queue struct {
	st      *Store
	name    string
	stream  string
	subject string
	fair    bool  // queue.fairness key: each key's jobs on a subject of their own
	win     int   // the window: windowFor the lane's rate and concurrency
	leaving int   // leavingFor the lane's rate and concurrency
	share   int64 // QueueSettings.StoreShare

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	backs  sync.WaitGroup // hand-backs and ledger deletes under way
	ready  func()
	wake   chan struct{} // cap 1: room in the window, or ensured
	order  order         // stores in the order of Offer

	levelsNow atomic.Int32 // levels, read by the intake's subject choice without mu

	mu       sync.Mutex
	keyConc  bool
	hold     holdings // the drainer's jobs of the window
	thaw     thaw     // no start after a gap until the pin is read (thaw.go)
	pro      promoter // what goes into the window next
	cnt      counts   // the stream's jobs by level, delayed
	recs     recordWrites
	bounds   bounds
	capDirty bool
	closed   bool
	s        natsjs.Stream   // the queue's stream: its jobs
	c        natsjs.Consumer // the window's consumer: its tokens
	broken   error           // ErrIncompatible found after start-up
}

var (
	_ queue.Queue   = (*Queue)(nil)
	_ queue.Settler = (*Queue)(nil)
	_ queue.Service = (*Queue)(nil)
	_ queue.Picker  = (*Queue)(nil)
	_ queue.Counter = (*Queue)(nil)
	_ queue.Finder  = (*Queue)(nil)
)

// Roles is the queue with the roles it plays: it settles the jobs it
// handed out with the stream, fetches in goroutines of its own, the drain
// may pass over a key's fetched jobs, and it stores several jobs as one
// atomic batch (atomic.go).
func (q *Queue) Roles() queue.Roles {
	return queue.Roles{Queue: q, Settler: q, Service: q, Picker: q, Counter: q, Finder: q, Atomic: q}
}

// QueueSettings are what a downstream's queue needs of its lane's settings.
type QueueSettings struct {
	Name        string
	Capacity    int     // the stream's max_msgs
	Rate        float64 // starts per second: sizes the prefetch
	Concurrency int     // deliveries in flight: sizes the prefetch
	// MaxBytes is queue.max_bytes, the stream's max_bytes (discard new):
	// a job past it is refused with queue.ErrMaxBytes. 0 = none.
	MaxBytes int64
	// StoreShare bounds the stream's bytes when MaxBytes is 0: the queue's
	// share of a bounded store, so that it can never take the room the
	// dead letters keep; a job past it is refused with queue.ErrNoSpace.
	// 0 = none.
	StoreShare int64
	// Priorities is queue.priorities (levels; below 1 = 1); Fairness is
	// queue.fairness key, with KeyCapacity (queue.key_capacity: the jobs
	// one key may hold; 0 = Capacity) and Weights. Fairness is fixed for
	// the queue's life (it chooses the subjects); the others follow
	// Configure.
	Priorities  int
	Fairness    bool
	KeyCapacity int
	Weights     map[string]int
	// Placement puts the stream in one cluster of a super-cluster (and on
	// servers with every tag); nil: where the server places it.
	Placement *Placement
}

// Placement is a stream's place in a super-cluster: the cluster named
// Cluster, servers with every tag of Tags.
type Placement struct {
	Cluster string
	Tags    []string
}

// Queue returns downstream ls.Name's queue. It does no I/O: the stream and
// consumer are ensured by its own goroutine once Start starts it (start-up
// calls Store.Ensure first, so an incompatible stream stops the daemon).
func (st *Store) Queue(ls QueueSettings) (*Queue, error) {
	if ls.Capacity < 1 {
		return nil, fmt.Errorf("jetstream: capacity must be >= 1, got %d", ls.Capacity)
	}
	st.place(ls)
	q := &Queue{
		st: st, name: ls.Name, stream: st.StreamName(ls.Name), subject: st.Subject(ls.Name), fair: ls.Fairness,
		win: windowFor(ls), leaving: leavingFor(ls), share: ls.StoreShare, wake: make(chan struct{}, 1), bounds: ls.bounds(),
		hold: holdings{taken: map[*queue.Job]natsjs.Msg{}, unrecorded: map[natsjs.Msg]*recordWrite{},
			origins: map[uint64]struct{}{}, ledger: map[uint64]ledgerEntry{}, retries: map[uint64]*waitingRetry{}},
		pro: promoter{wake: make(chan struct{}, 1), promoted: map[uint64]promotedJob{}},
	}
	q.hold.index.init(ls.Fairness)
	q.configureLocked(queue.Settings{Capacity: ls.Capacity, KeyCapacity: ls.KeyCapacity, Weights: ls.Weights,
		Priorities: ls.Priorities, MaxBytes: ls.MaxBytes})
	q.ctx, q.cancel = context.WithCancel(context.Background())
	q.recs.ctx, q.recs.cancel = context.WithCancel(context.Background())
	q.recs.left = make(chan struct{}, 1)
	return q, nil
}

// Notify sets ready, called when jobs were fetched. Call it before Start.
func (q *Queue) Notify(ready func()) { q.ready = ready }

// Start starts fetching and promoting; it does no I/O itself, so it
// never fails.
func (q *Queue) Start(context.Context) error {
	if q.ready == nil {
		q.ready = func() {}
	}
	q.wg.Go(q.maintain)
	q.wg.Go(q.fetch)
	q.wg.Go(q.keepAlive)
	q.wg.Go(q.promote)
	return nil
}

// Close stops fetching, hands jobs fetched but not started back to the
// stream (each counted in the ledger first: the delivery was not a try;
// they are redelivered at once to whichever instance drains next), waits
// up to closeRecordWait for the dedupe records of delivered jobs (a job
// whose record was not stored by then is nak'ed too: delivered again
// rather than gone without its record) and waits for the queue's
// goroutines. Idempotent.
func (q *Queue) Stop() error {
	q.handBack()
	q.waitRecords(closeRecordWait)
	q.wg.Wait()
	q.backs.Wait()
	return nil
}

// handBack stops the goroutines (without waiting) and hands held jobs back.
func (q *Queue) handBack() {
	q.cancel()
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		q.handBackLocked(q.hold.index.release())
		q.forgetRetriesLocked()
	}
	for _, m := range q.hold.acks.all() { // delivered: ack now rather than lose the ack
		q.settleLocked(m, false)
	}
}

// Offer returns the Stored that publishes job to the stream: it may block
// while the window of unacknowledged publishes is full, and calls done
// from the store's goroutine with the job's position (an estimate: the
// stream is shared; with levels, the jobs of its own and more urgent
// levels) or an error wrapping queue.ErrFull (the stream is at max_msgs;
// queue.ErrKeyFull: the key's subject at queue.key_capacity) or
// queue.ErrDuplicate (its Nats-Msg-Id was stored already). Its priority
// and instant are stored with it (headers), and its subject says its
// level or key (see the package doc's Layout).
func (q *Queue) Offer(job *queue.Job, _ time.Time) queue.Stored {
	return queue.Later(func(done func(queue.Placed, error)) {
		q.enqueue(job, func(pos int, err error) {
			done(queue.Placed{Position: pos, Ahead: max(pos-1, 0)}, err)
		})
	})
}

// enqueue stores job in the stream.
func (q *Queue) enqueue(job *queue.Job, done func(int, error)) {
	q.mu.Lock()
	broken := q.broken
	q.mu.Unlock()
	if broken != nil {
		done(0, broken)
		return
	}
	q.st.publish(q, job, done)
}

// stored books the PubAck of job, stored at stream sequence seq, and
// returns its position: the stream's depth, or with levels the jobs of
// its own and the more urgent levels, less those that start after it or
// have started (notAheadLocked).
func (q *Queue) stored(seq uint64, job *queue.Job, subject string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.cnt.depth.stored(seq)
	if src := q.pro.srcs.get(q.subject, subject); seq > src.stored {
		src.stored = seq
		src.count++
		q.pro.srcs.ringLocked(src)
		q.nudge()
	}
	if len(q.cnt.levels) == 0 {
		return max(q.cnt.depth.n-q.notAheadLocked(job, time.Now()), 1)
	}
	l := queue.Level(job, len(q.cnt.levels))
	q.cnt.levels[l].stored(seq)
	return max(q.aheadLocked(l)-q.notAheadLocked(job, time.Now()), 1)
}

// aheadLocked is the jobs of level l and the more urgent levels (all of
// them without per-level counts). Requires q.mu.
func (q *Queue) aheadLocked(l int) int {
	if len(q.cnt.levels) == 0 {
		return q.cnt.depth.n
	}
	n := 0
	for i := range q.cnt.levels[:min(l, len(q.cnt.levels)-1)+1] {
		n += q.cnt.levels[i].n
	}
	return n
}

func (q *Queue) streamHandle() natsjs.Stream {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.s
}

// Ahead is the jobs that start first: the stream's depth, or with levels
// (no fairness) the jobs of job's own level and the more urgent ones
// (their subjects' counts), less those the drainer knows start after job
// or have started (notAheadLocked). Under fairness it is the stream's
// depth less those, an upper bound.
func (q *Queue) Ahead(job *queue.Job, at time.Time) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.cnt.depth.n
	if len(q.cnt.levels) > 0 {
		n = q.aheadLocked(queue.Level(job, len(q.cnt.levels)))
	}
	return max(n-q.notAheadLocked(job, at), 0)
}

// Cost is Len: the stream bounds jobs by count, not cost.
func (q *Queue) Cost() int { return q.Len() }

// Configure changes the bounds (capacity, and the byte bound: s.MaxBytes,
// or the queue's store share (SetShare) when it is 0; under
// fairness the per-key bound, s.KeyCapacity), the levels and the weights;
// the stream is updated in the background.
func (q *Queue) Configure(s queue.Settings) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.configureLocked(s)
	q.signal()
}

func (q *Queue) configureLocked(s queue.Settings) {
	b := bounds{capacity: s.Capacity, maxBytes: s.MaxBytes, explicit: s.MaxBytes > 0,
		perKey: perKeyBound(q.fair, s.KeyCapacity, s.Capacity)}
	if !b.explicit {
		b.maxBytes = q.share
	}
	if b != q.bounds {
		q.bounds, q.capDirty = b, true
	}
	levels := max(s.Priorities, 1)
	q.levelsNow.Store(int32(levels))
	switch {
	case levels == 1:
		q.cnt.levels = nil
	case len(q.cnt.levels) != levels:
		q.cnt.levels = make([]depthBook, levels) // counted at the next refresh
	}
	if len(q.pro.srcs.ring) != levels {
		q.pro.srcs.configure(q.subject, levels)
	}
	if s.Rate > 0 { // the lane's drain changed (a rate, concurrency or batch.max_jobs)
		d := QueueSettings{Rate: s.Rate, Concurrency: max(s.Concurrency, 1)}
		q.win, q.leaving = windowFor(d), leavingFor(d)
	}
	q.pro.weights = s.Weights
	q.hold.index.configure(s)
	q.keyConc = s.KeyConcurrency > 0
	q.nudge()
}

// windowLocked is the jobs the window holds at most: the lane's window,
// or keyWindow under a per-key cap when that is more (look further ahead:
// a capped key's jobs hold their places in it). Requires q.mu.
func (q *Queue) windowLocked() int {
	if q.keyConc {
		return max(q.win, keyWindow)
	}
	return q.win
}

// Keep holds a job whose delivery was cancelled at shutdown, as a pushback
// does; Close hands it back to the stream, which redelivers it.
func (q *Queue) Keep(job *queue.Job) bool {
	q.RetryLater(job, time.Time{}, true)
	return true
}

// Release stops fetching and hands fetched jobs back to the stream (Close
// waits for that); it returns none, since the stored jobs stay stored at
// shutdown. (Expiry of
// stored jobs is checked when a start reaches them: there is no front to
// drop.)
func (q *Queue) Release() []*queue.Job {
	q.handBack()
	return nil
}

// Len is the number of jobs in the stream (refreshed every 500 ms from the
// server, adjusted for this instance's stores and acks in between; see
// depthBook).
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.cnt.depth.n
}

// Cap is the stream's bound.
func (q *Queue) Cap() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bounds.capacity
}

// signal wakes the fetcher and the promoter: there may be room. Requires
// q.mu or nothing; never blocks.
func (q *Queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
	q.nudge()
}

// Ready reports whether the queue's stream and consumer exist and match the
// config, and the dedupe records of the window are in memory: nil when
// jobs can be stored and drained at full speed, else why not (while the
// records load, a job with a Nats-Msg-Id is looked up in their stream).
func (q *Queue) Ready() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.broken != nil:
		return q.broken
	case q.closed:
		return fmt.Errorf("jetstream: queue %s is closed", q.name)
	case q.s == nil || q.c == nil:
		return fmt.Errorf("jetstream: stream %s not ready yet", q.stream)
	}
	return q.st.recordsReady()
}
