package jetstream

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/queue"
)

// MaxAtomic is the most jobs one Queue.OfferAll stores (queue.Atomic's
// MaxAll): nats-server's default limit on the messages of one atomic
// batch (its jetstream max_batch_size option, 1 000 unless set). A client
// cannot read the server's option, so a server configured with a lower
// limit refuses a larger batch whole (an error naming max_batch_size); a
// higher one is not used.
const MaxAtomic = 1000

// Headers of an atomic batch's messages (ADR-50).
const (
	hdrBatchID     = "Nats-Batch-Id"       // the batch: at most 64 characters
	hdrBatchSeq    = "Nats-Batch-Sequence" // 1..n
	hdrBatchCommit = "Nats-Batch-Commit"   // "1" on the last: the server stores all or none
)

// atomicTries is how many times OfferAll sends its batch: the server
// refuses a batch whole for one message whose Nats-Msg-Id it holds, so a
// refused batch is sent again without the duplicates found meanwhile.
const atomicTries = 3

// Refusals of an atomic batch, told apart by the JetStream API's answer.
const (
	errCodeAtomicDisabled   = 10174 // the stream does not allow atomic publish
	errCodeAtomicIncomplete = 10176 // a message of the batch was lost, or it timed out
	errCodeAtomicTooLarge   = 10199 // over the server's max_batch_size
	errCodeAtomicDuplicate  = 10201 // a message's Nats-Msg-Id is held already
	errCodeAtomicInflight   = 10210 // too many batches open on the stream or server
	errCodeDuplicateInFlux  = 10158 // a Nats-Msg-Id whose store is in flight
)

// Errors of OfferAll.
var (
	// errNoAtomic: the stream does not take atomic batches: the server
	// predates them (nats-server 2.12) or the stream's allow_atomic is off.
	errNoAtomic = errors.New("jetstream: the stream does not take atomic batches (allow_atomic; nats-server 2.12 or later)")
	// errBatchTooLarge: more jobs than one atomic batch may hold.
	errBatchTooLarge = errors.New("jetstream: too many jobs for one atomic batch")
	// errBatchBusy: the server holds as many open batches as it allows.
	errBatchBusy = errors.New("jetstream: the server has too many atomic batches in flight")
)

var _ queue.Atomic = (*Queue)(nil)

// MaxAll is MaxAtomic: the most jobs one OfferAll stores.
func (q *Queue) MaxAll() int { return MaxAtomic }

// OfferAll returns the StoredAll that stores jobs in the queue's stream as
// one atomic batch (nats-server's atomic batch publish): every job, in
// order, or none, even if the server or this process stops midway. Each
// job is encoded and placed on its subject exactly as Offer does, named by
// its place when it has no ID, and booked as Offer books it (Placed.Position
// and Ahead alike). A job whose DedupeID is held already (a record in the
// table or the records stream, a job still in the stream, or an earlier
// job of the same call) is left out of the batch and answered
// Placed{Duplicate: true} with the original's job id. The caller runs the
// StoredAll's Then after releasing its lock: it may block while the
// publisher's window has no room for the batch (see publishAll), and
// answers from the publisher's goroutine.
//
// The error, for all jobs, wraps queue.ErrFull (queue.ErrMaxBytes,
// queue.ErrKeyFull) when the stream cannot take them all, errBatchTooLarge
// for more than MaxAtomic jobs (or the server's own lower limit),
// errNoAtomic when the stream does not take atomic batches, or is the
// store's failure. A batch whose commit got no PubAck in time (lost with a
// connection, a server that stopped answering) is an error too, although
// the server may have stored it: as for Offer, the producer is answered
// unavailable and a retry with its Nats-Msg-Ids is answered duplicate.
func (q *Queue) OfferAll(jobs []*queue.Job, _ time.Time) queue.StoredAll {
	return queue.LaterAll(func(done func([]queue.Placed, error)) {
		q.storeAll(jobs, done)
	})
}

// atomicBatch is one OfferAll on its way: its jobs, their answers, and the
// batch last sent.
type atomicBatch struct {
	q      *Queue
	jobs   []*queue.Job
	placed []queue.Placed
	same   []int // same[i] = j: job i repeats job j's DedupeID (j < i); -1: none
	done   func([]queue.Placed, error)
	tries  int // batches sent

	// The batch last sent (set before it is sent; read by its answer).
	id       string
	idx      []int    // the jobs in it, in order
	subjects []string // their subjects
	epoch    string   // a job without an ID is named under it
}

// storeAll stores jobs as one batch and answers done.
func (q *Queue) storeAll(jobs []*queue.Job, done func([]queue.Placed, error)) {
	if err := q.atomicReady(len(jobs)); err != nil {
		done(nil, err)
		return
	}
	b := &atomicBatch{q: q, jobs: jobs, placed: make([]queue.Placed, len(jobs)), same: make([]int, len(jobs)), done: done}
	unsure := b.lookUpTable()
	switch {
	case len(unsure) > 0:
		q.st.inFlight <- struct{}{}
		turn := q.order.add(nil)
		go b.lookUpThenSend(unsure, turn)
	case !q.order.idle(): // behind a job being looked up
		q.order.add(b.send)
	default:
		b.send()
	}
}

// atomicReady returns why q cannot store n jobs as one batch, nil when it
// can: too many jobs, an incompatible stream, or a stream that does not
// take atomic batches (read from its info when ensured, else asked).
func (q *Queue) atomicReady(n int) error {
	if n > MaxAtomic {
		return fmt.Errorf("%w: %d jobs, at most %d (the server's limit on one atomic batch)", errBatchTooLarge, n, MaxAtomic)
	}
	q.mu.Lock()
	broken, s := q.broken, q.s
	q.mu.Unlock()
	if broken != nil {
		return broken
	}
	if s == nil { // not started: ask the stream itself
		ctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
		defer cancel()
		var err error
		if s, err = q.st.js.Stream(ctx, q.stream); err != nil {
			return fmt.Errorf("jetstream: look up stream %s: %w", q.stream, err)
		}
	}
	if info := s.CachedInfo(); info == nil || !info.Config.AllowAtomicPublish {
		return fmt.Errorf("%w: stream %s", errNoAtomic, q.stream)
	}
	return nil
}

// lookUpTable answers the jobs whose DedupeID repeats an earlier job's or
// is in the table of records, and returns those whose id the table cannot
// answer (see recordTable.get).
func (b *atomicBatch) lookUpTable() (unsure []int) {
	first := map[string]int{}
	now := time.Now()
	for i, job := range b.jobs {
		b.same[i] = -1
		if job.DedupeID == "" {
			continue
		}
		if j, ok := first[job.DedupeID]; ok {
			b.same[i] = j
			continue
		}
		first[job.DedupeID] = i
		switch jobID, found, sure := b.q.st.table.get(now, job.DedupeID); {
		case found:
			b.duplicate(i, jobID)
		case !sure:
			unsure = append(unsure, i)
		}
	}
	return unsure
}

// lookUpThenSend looks the jobs of unsure up in the records stream, then
// sends the batch in turn (q's order: the stores of a queue keep the
// order of their offers). It runs in its own goroutine.
func (b *atomicBatch) lookUpThenSend(unsure []int, turn *step) {
	st := b.q.st
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	var err error
	for _, i := range unsure {
		var jobID string
		var found bool
		if jobID, found, err = st.lookup(ctx, b.jobs[i].DedupeID); err != nil {
			break
		}
		if found {
			b.duplicate(i, jobID)
		}
	}
	cancel()
	<-st.inFlight
	if err != nil {
		b.q.order.ready(turn, func() { b.done(nil, err) })
		return
	}
	b.q.order.ready(turn, b.send)
}

// duplicate answers job i: its DedupeID is held by the job jobID ("" when
// known nowhere).
func (b *atomicBatch) duplicate(i int, jobID string) {
	b.jobs[i].ID = jobID
	b.placed[i] = queue.Placed{Duplicate: true}
}

// left is the jobs still to store: neither a duplicate nor a repeat.
func (b *atomicBatch) left() []int {
	idx := make([]int, 0, len(b.jobs))
	for i := range b.jobs {
		if b.same[i] < 0 && !b.placed[i].Duplicate {
			idx = append(idx, i)
		}
	}
	return idx
}

// send stores the jobs left as one atomic batch: its messages pipelined,
// each encoded as Offer encodes a job, the last with the commit and the
// one reply subject (see publishAll). The answer comes to stored.
func (b *atomicBatch) send() {
	idx := b.left()
	if len(idx) == 0 {
		b.finish()
		return
	}
	b.tries++
	b.id, b.idx, b.epoch = rand.Text(), idx, b.q.epochNow()
	b.subjects = make([]string, len(idx))
	msgs := make([]*nats.Msg, len(idx))
	now := time.Now()
	for k, i := range idx {
		job := b.jobs[i]
		if job.ID == "" && b.epoch == "" {
			job.ID = rand.Text() // unique, as a name would be
		}
		m := encode(b.q.subjectFor(job, now), job)
		m.Header[hdrBatchID] = []string{b.id}
		m.Header[hdrBatchSeq] = []string{strconv.Itoa(k + 1)}
		if k == len(idx)-1 {
			m.Header[hdrBatchCommit] = []string{"1"}
		}
		b.subjects[k], msgs[k] = m.Subject, m
	}
	if err := b.q.st.pub.publishAll(msgs, pendingPub{q: b.q, reply: b.stored}); err != nil {
		b.done(nil, fmt.Errorf("store %d jobs in stream %s as one batch: %w", len(idx), b.q.stream, err))
	}
}

// stored takes the commit's PubAck: it names and books each job, or sends
// the batch again without the duplicates the server refused it for. It
// runs on the publisher's goroutine: the search for duplicates, which
// reads from the server, runs in a goroutine of its own.
func (b *atomicBatch) stored(pa pubAck, err error) {
	var apiErr *natsjs.APIError
	isAPI := errors.As(err, &apiErr)
	switch {
	case err == nil:
		b.book(pa)
	case isAPI && (apiErr.ErrorCode == errCodeAtomicDuplicate || apiErr.ErrorCode == errCodeDuplicateInFlux) &&
		b.tries < atomicTries:
		go b.findDuplicates()
	default:
		b.done(nil, b.q.refusedBatch(err, len(b.idx)))
	}
}

// book names and books the jobs of the batch the server stored: the
// commit's PubAck gives the last one's sequence and their count, and an
// atomic batch's messages take consecutive sequences (the server commits
// them in one step, holding the stream's other stores off).
func (b *atomicBatch) book(pa pubAck) {
	n := uint64(len(b.idx))
	if pa.batch != b.id || pa.count != n || pa.seq < n {
		// Not an atomic batch's PubAck: a server that stored the messages
		// one by one (it predates atomic batches and ignored allow_atomic).
		b.done(nil, fmt.Errorf("%w: stream %s answered a batch of %d jobs with a PubAck of batch %q, count %d, sequence %d",
			errNoAtomic, b.q.stream, n, pa.batch, pa.count, pa.seq))
		return
	}
	first := pa.seq - n + 1
	for k, i := range b.idx {
		seq, job := first+uint64(k), b.jobs[i]
		if job.ID == "" {
			job.ID, job.Named = nameOf(b.epoch, seq), true
		}
		pos := b.q.stored(seq, job, b.subjects[k])
		b.placed[i] = queue.Placed{Position: pos, Ahead: max(pos-1, 0)}
	}
	b.finish()
}

// finish answers every job: a repeat of an earlier job's DedupeID as that
// job's duplicate (its id).
func (b *atomicBatch) finish() {
	for i, j := range b.same {
		if j >= 0 {
			b.duplicate(i, b.jobs[j].ID)
		}
	}
	b.done(b.placed, nil)
}

// refusedBatch maps the server's refusal of a batch of n jobs to q's
// error: a bound as Offer maps it (refused), else what the server said of
// the batch.
func (q *Queue) refusedBatch(err error, n int) error {
	var apiErr *natsjs.APIError
	if !errors.As(err, &apiErr) {
		return q.refused(err)
	}
	switch apiErr.ErrorCode {
	case errCodeAtomicDisabled:
		return fmt.Errorf("%w: stream %s: %v", errNoAtomic, q.stream, err)
	case errCodeAtomicTooLarge:
		return fmt.Errorf("%w: %d jobs are over the server's limit on one atomic batch (its jetstream max_batch_size is below %d): %v",
			errBatchTooLarge, n, MaxAtomic, err)
	case errCodeAtomicInflight:
		return fmt.Errorf("%w: stream %s: %v", errBatchBusy, q.stream, err)
	case errCodeAtomicIncomplete:
		return fmt.Errorf("store %d jobs in stream %s as one batch: a message of it was lost on the way or it timed out, none was stored: %w",
			n, q.stream, err)
	case errCodeAtomicDuplicate, errCodeDuplicateInFlux:
		return fmt.Errorf("store %d jobs in stream %s as one batch: refused %d times for a Nats-Msg-Id held already: %w",
			n, q.stream, atomicTries, err)
	}
	return q.refused(err)
}
