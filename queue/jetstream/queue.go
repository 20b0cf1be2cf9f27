package jetstream

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/shaperd/shaper/queue"
)

// Tuning of the drain.
const (
	maxPrefetch   = 100
	prefetchAhead = 20 * time.Millisecond // prefetch covers this much drain at the lane's rate
	refreshEvery  = 500 * time.Millisecond
	retryEvery    = time.Second
)

// held is a fetched message and the job it carries.
type held struct {
	job *queue.Job
	msg natsjs.Msg
	at  time.Time // ready to start from
}

// Queue is one downstream's durable queue, a queue.Queue whose jobs are
// stored in the stream: Offer's Stored publishes and waits for the PubAck,
// Take hands out fetched messages, RetryLater naks with a delay. It settles
// each job it handed out (queue.Settler: Ack acks, held to the end of the
// job's drain interval; GiveUp terms; Keep holds) and runs goroutines of
// its own (queue.Service: fetch, maintain, keep-alive, from Start until
// Close); the stream bounds and keeps its jobs, so it plays no
// queue.Memory role.
// Create it with Store.Queue. Its methods are safe for concurrent use and
// never block on I/O (acks and naks are sent without waiting for an
// answer).
type Queue struct {
	st       *Store
	name     string
	stream   string
	subject  string
	prefetch int   // held fetched jobs at most: base, or maxPrefetch under a per-key cap
	base     int   // prefetchFor the lane's rate and concurrency
	share    int64 // QueueSettings.StoreShare

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ready  func()
	wake   chan struct{} // cap 1: room in the prefetch, or ensured
	order  order         // stores in the order of Offer

	mu    sync.Mutex
	buf   []held                     // fetched, not taken; FIFO
	pb    []held                     // pushed back, held locally until at; sorted by at
	taken map[*queue.Job]natsjs.Msg  // started, not yet acked or termed
	held  map[natsjs.Msg]*time.Timer // delivered, ack held to the end of the job's slot (Ack)
	// unrecorded are due to leave the stream (ack or term) once their
	// dedupe record is stored; see settleLocked.
	unrecorded map[natsjs.Msg]*recordWrite
	recs       recordWrites
	depth      depthBook // stream's messages (refreshed; adjusted locally)
	bounds     bounds
	capDirty   bool
	closed     bool
	s          natsjs.Stream
	c          natsjs.Consumer
	broken     error // ErrIncompatible found after start-up
}

var (
	_ queue.Queue   = (*Queue)(nil)
	_ queue.Settler = (*Queue)(nil)
	_ queue.Service = (*Queue)(nil)
	_ queue.Picker  = (*Queue)(nil)
)

// Roles is the queue with the roles it plays: it settles the jobs it
// handed out with the stream, fetches in goroutines of its own, and the
// drain may pass over a key's fetched jobs.
func (q *Queue) Roles() queue.Roles {
	return queue.Roles{Queue: q, Settler: q, Service: q, Picker: q}
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
}

// Queue returns downstream ls.Name's queue. It does no I/O: the stream and
// consumer are ensured by its own goroutine once Start starts it (start-up
// calls Store.Ensure first, so an incompatible stream stops the daemon).
func (st *Store) Queue(ls QueueSettings) (*Queue, error) {
	if ls.Capacity < 1 {
		return nil, fmt.Errorf("jetstream: capacity must be >= 1, got %d", ls.Capacity)
	}
	q := &Queue{
		st: st, name: ls.Name, stream: st.StreamName(ls.Name), subject: st.Subject(ls.Name),
		prefetch: prefetchFor(ls), base: prefetchFor(ls), share: ls.StoreShare, wake: make(chan struct{}, 1),
		taken: map[*queue.Job]natsjs.Msg{}, held: map[natsjs.Msg]*time.Timer{}, bounds: ls.bounds(),
		unrecorded: map[natsjs.Msg]*recordWrite{},
	}
	q.ctx, q.cancel = context.WithCancel(context.Background())
	q.recs.ctx, q.recs.cancel = context.WithCancel(context.Background())
	return q, nil
}

// prefetchFor is how many fetched jobs a lane may hold: its concurrency, or
// 20 ms of drain at its rate when that is more (a prefetch of 1 would cap a
// fast lane at one start per fetch round trip), at most maxPrefetch.
func prefetchFor(ls QueueSettings) int {
	ahead := int(math.Ceil(ls.Rate * prefetchAhead.Seconds()))
	return min(max(ls.Concurrency, ahead, 1), maxPrefetch)
}

// Start starts fetching; ready is called when jobs were fetched.
func (q *Queue) Start(ready func()) {
	q.ready = ready
	q.wg.Go(q.maintain)
	q.wg.Go(q.fetch)
	q.wg.Go(q.keepAlive)
}

// Close stops fetching, naks jobs fetched but not started (they are
// redelivered at once to whichever instance drains next), waits up to
// closeRecordWait for the dedupe records of delivered jobs (a job whose
// record was not stored by then is nak'ed too: delivered again rather
// than gone without its record) and waits for the queue's goroutines.
// Idempotent.
func (q *Queue) Close() error {
	q.handBack()
	q.waitRecords(closeRecordWait)
	q.wg.Wait()
	return nil
}

// handBack stops the goroutines (without waiting) and naks held jobs.
func (q *Queue) handBack() {
	q.cancel()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for _, h := range append(q.buf, q.pb...) {
		_ = h.msg.Nak()
	}
	q.buf, q.pb = nil, nil
	for m, t := range q.held { // delivered: ack now rather than lose the ack
		t.Stop()
		q.ackLocked(m)
	}
}

// Offer returns the Stored that publishes job to the stream: it may block
// while the window of unacknowledged publishes is full, and calls done
// from the store's goroutine with the job's position (an estimate: the
// stream is shared) or an error wrapping queue.ErrFull (the stream is at
// max_msgs) or queue.ErrDuplicate (its Nats-Msg-Id was stored already).
// The stream has one priority level and keeps no ready instant: Priority
// and NotBefore are not stored (the config refuses queue.priorities above
// 1 on this kind, and the lane refuses a delayed job before offering it).
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

// stored books the PubAck of stream sequence seq and returns the job's
// position.
func (q *Queue) stored(seq uint64) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.depth.stored(seq)
	return q.depth.n
}

func (q *Queue) streamHandle() natsjs.Stream {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.s
}

// Ahead is the stream's depth: every stored job starts first (the stream
// keeps one level and no delayed jobs).
func (q *Queue) Ahead(*queue.Job, time.Time) int { return q.Len() }

// Cost is Len: the stream bounds jobs by count, not cost.
func (q *Queue) Cost() int { return q.Len() }

// Configure changes the bounds (capacity, and the byte bound: s.MaxBytes,
// or the store share the queue was created with when it is 0); the stream
// is updated in the background.
func (q *Queue) Configure(s queue.Settings) {
	q.mu.Lock()
	defer q.mu.Unlock()
	b := bounds{capacity: s.Capacity, maxBytes: s.MaxBytes, explicit: s.MaxBytes > 0}
	if !b.explicit {
		b.maxBytes = q.share
	}
	if b != q.bounds {
		q.bounds, q.capDirty = b, true
	}
	q.prefetch = q.base
	if s.KeyConcurrency > 0 { // look further ahead: a capped key's jobs hold their places in it
		q.prefetch = maxPrefetch
	}
	q.signal()
}

// Keep holds a job whose delivery was cancelled at shutdown, as a pushback
// does; Close hands it back to the stream, which redelivers it.
func (q *Queue) Keep(job *queue.Job) bool {
	q.RetryLater(job, time.Time{}, true)
	return true
}

// NextReady returns when the next held job may start.
func (q *Queue) NextReady() (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case len(q.pb) > 0:
		return q.pb[0].at, true
	case len(q.buf) > 0:
		return q.buf[0].at, true
	}
	return time.Time{}, false
}

// Take hands out the next job: a pushed-back job first once its time came.
func (q *Queue) Take(now time.Time) (*queue.Job, time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var h held
	switch {
	case len(q.pb) > 0 && !q.pb[0].at.After(now):
		h, q.pb = q.pb[0], q.pb[1:]
	case len(q.buf) > 0:
		h, q.buf = q.buf[0], q.buf[1:]
	default:
		return nil, time.Time{}, false
	}
	q.taken[h.job] = h.msg
	q.signal()
	return h.job, h.at, true
}

// Ack acks job's message at at: until then it
// stays in the stream and counts against the bound, as the slot the job
// started in does in the memory queue, so a burst into an idle downstream
// accepts exactly min(N, capacity) on either backend. A crash while an ack
// is held redelivers that one job (at most the last start per downstream).
func (q *Queue) Ack(job *queue.Job, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	m, ok := q.taken[job]
	if !ok {
		return
	}
	delete(q.taken, job)
	d := time.Until(at)
	if d <= 0 || q.closed {
		q.ackLocked(m)
		return
	}
	q.held[m] = time.AfterFunc(d, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if _, ok := q.held[m]; ok { // else Close acked it already
			q.ackLocked(m)
		}
	})
}

// ackLocked acks m, once its dedupe record is stored, and forgets it.
// Requires q.mu.
func (q *Queue) ackLocked(m natsjs.Msg) {
	delete(q.held, m)
	q.settleLocked(m, false)
}

// RetryLater naks job with the delay until at, so the retry waits in the
// stream; a pushed-back job is held here (kept alive) while the lane
// pauses, so the pushback does not count as a delivery.
func (q *Queue) RetryLater(job *queue.Job, at time.Time, pushback bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	m, ok := q.taken[job]
	if !ok {
		return
	}
	delete(q.taken, job)
	if pushback && !q.closed {
		i := len(q.pb)
		for i > 0 && q.pb[i-1].at.After(at) {
			i--
		}
		q.pb = append(q.pb, held{})
		copy(q.pb[i+1:], q.pb[i:])
		q.pb[i] = held{job: job, msg: m, at: at}
		return
	}
	if d := time.Until(at); d > 0 {
		_ = m.NakWithDelay(d)
	} else {
		_ = m.Nak()
	}
}

// GiveUp terms job (its dead letter was stored), once its dedupe record
// is stored: the stream deletes it.
func (q *Queue) GiveUp(job *queue.Job) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if m, ok := q.taken[job]; ok {
		delete(q.taken, job)
		q.settleLocked(m, true)
	}
}

// Release stops fetching and hands fetched jobs back to the stream; it
// returns none, since the stored jobs stay stored at shutdown. (Expiry of
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
	return q.depth.n
}

// Cap is the stream's bound.
func (q *Queue) Cap() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bounds.capacity
}

// signal wakes the fetcher. Requires q.mu or nothing; never blocks.
func (q *Queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
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
