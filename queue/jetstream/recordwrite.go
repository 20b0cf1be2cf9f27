package jetstream

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// Tuning of the record writes.
const (
	// closeRecordWait bounds how long Close waits for the records of the
	// jobs that are due to leave the stream.
	closeRecordWait = 2 * time.Second
	recordPubWait   = 2 * time.Second        // one write's PubAck; then it is sent again
	recordRetryMin  = 100 * time.Millisecond // between failed writes, doubling
	recordRetryMax  = time.Second
	recordWarnAfter = 5 // failed tries of one record before a warning
	// recordIDPrefix makes a record's own Nats-Msg-Id: a write sent again
	// (its PubAck was lost) or by another instance after a redelivery is
	// stored once.
	recordIDPrefix = "shaper-record:"
)

// recordWrite is a job due to leave its stream: once its record is
// stored (rec; nil: none, or stored), it is deleted from the stream, then
// its token acked (or termed).
type recordWrite struct {
	m    natsjs.Msg
	term bool // else ack
	rec  *nats.Msg
	s    natsjs.Stream // the job's stream
}

// recordWrites are a queue's outstanding record writes: each runs in a
// goroutine of its own until its record is stored or Close gives up.
type recordWrites struct {
	ctx     context.Context // cancelled when Close gives up
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	left    chan struct{} // cap 1: a job left its stream (waitRecords)
	gaveUp  bool          // Close stopped waiting: later jobs are left queued (under q.mu)
	failing bool          // a write failed and none succeeded since (under q.mu)
}

// recordFor returns the record to store before m leaves its stream: its
// job id (its Shaper-Job-Id, else its name in a stream of epoch) under its
// Nats-Msg-Id, or nil when it has no Nats-Msg-Id or its window has ended
// (nothing to answer a copy with).
func (st *Store) recordFor(m natsjs.Msg, epoch string) *nats.Msg {
	h := m.Headers()
	msgID, jobID := h.Get(hdrMsgID), h.Get(hdrJobID)
	if j, ok := m.(*jobMsg); ok && jobID == "" && epoch != "" {
		jobID = nameOf(epoch, j.seq())
	}
	if msgID == "" || jobID == "" {
		return nil
	}
	enqueued := unixNano(h.Get(hdrEnqueued))
	if enqueued.IsZero() || time.Since(enqueued) >= st.set.DedupeWindow {
		return nil
	}
	rec := st.recordMsg(msgID, jobID, enqueued)
	rec.Header.Set(nats.MsgIdHdr, recordIDPrefix+jobID)
	return rec
}

// settleLocked lets m's job leave its stream (delete) and acks its token
// (or terms it, when term), once its dedupe record is stored. While the
// job is in its stream the stream answers a copy of its id (its duplicate
// window); from then on the record does, so the record must be stored
// first: a record written without waiting for its PubAck and lost (a
// node restarting, a leader election, a dropped connection) left a
// delivered job that no instance could name, and a producer retrying its
// id got a new job, delivered twice, or a duplicate without a job id. The
// job is deleted before its token is acked: a token whose job is gone is
// dropped when delivered again, while a job whose token was acked first
// would be promoted again.
//
// The writes run in a goroutine of their own, off the queue's lock, each
// waiting for its answer, and are sent again until they succeed. Meanwhile
// the job stays held: its token kept alive, holding its place in the
// window (so a store that cannot take records stops the drain after a
// window's worth of jobs, bounding what a crash would deliver again).
// Requires q.mu.
func (q *Queue) settleLocked(m natsjs.Msg, term bool) {
	if q.recs.gaveUp { // after Close: leave it queued, delivered again
		q.letGoLocked(m)
		_ = m.Nak()
		return
	}
	w := &recordWrite{m: m, term: term, rec: q.st.recordFor(m, q.epochNow()), s: q.s}
	q.hold.unrecorded[m] = w
	q.recs.wg.Go(func() { q.writeRecord(w) })
}

// finishLocked acks or terms m's token: its job left the stream. Requires
// q.mu.
func (q *Queue) finishLocked(m natsjs.Msg, term bool) {
	if term {
		_ = m.TermWithReason("shaperd: dead-lettered")
	} else {
		_ = m.Ack()
	}
	q.cnt.depth.remove()
	q.forgetLocked(m)
}

// writeRecord is a leaving job's goroutine: it stores w's record and
// deletes the job from its stream, each sent again after a failure, then
// settles w's token; it gives up when Close does.
func (q *Queue) writeRecord(w *recordWrite) {
	wait := recordRetryMin
	for try := 1; ; try++ {
		err := q.leave(w)
		q.mu.Lock()
		_, mine := q.hold.unrecorded[w.m] // else Close handed it back
		wake := false
		if mine && err == nil {
			wake = len(q.hold.unrecorded) >= q.leaving // the lane waited for this
			delete(q.hold.unrecorded, w.m)
			q.finishLocked(w.m, w.term)
			q.signal() // its place in the window is free
			select {
			case q.recs.left <- struct{}{}: // for waitRecords
			default:
			}
		}
		recovered := err == nil && q.recs.failing
		q.recs.failing = err != nil
		q.mu.Unlock()
		if wake && q.ready != nil {
			q.ready()
		}
		switch {
		case recovered:
			q.st.log.Info("jetstream jobs leave their stream again", "downstream", q.name, "stream", q.stream)
		case err != nil && try == recordWarnAfter:
			q.st.log.Warn("jetstream job not settled yet (dedupe record, or its removal from the stream); it stays queued until it is",
				"downstream", q.name, "stream", q.stream, "tries", try, "error", err.Error())
		}
		if !mine || err == nil {
			return
		}
		select {
		case <-q.recs.ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, recordRetryMax)
	}
}

// leave stores w's record, if not stored yet, and deletes its job from
// the stream (a job gone already is not an error).
func (q *Queue) leave(w *recordWrite) error {
	if w.rec != nil {
		if err := q.st.putRecord(q.recs.ctx, w.rec); err != nil {
			return err
		}
		w.rec = nil
	}
	j, ok := w.m.(*jobMsg)
	if !ok || w.s == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(q.recs.ctx, recordPubWait)
	defer cancel()
	if err := w.s.DeleteMsg(ctx, j.seq()); err != nil && !gone(err) {
		return fmt.Errorf("delete job %d from stream %s: %w", j.seq(), q.stream, err)
	}
	return nil
}

// putRecord stores rec in the records stream and waits for its PubAck (a
// duplicate PubAck means it was stored already), at most recordPubWait.
func (st *Store) putRecord(ctx context.Context, rec *nats.Msg) error {
	ctx, cancel := context.WithTimeout(ctx, recordPubWait)
	defer cancel()
	_, err := st.js.PublishMsg(ctx, rec)
	return err
}

// waitRecords waits up to d for the outstanding record writes, then gives
// up on the rest: their jobs are nak'ed (delivered again, by whichever
// instance drains next, rather than acked without a record), and jobs
// settled from now on are left queued the same way. It returns once every
// write's goroutine has ended.
func (q *Queue) waitRecords(d time.Duration) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		q.mu.Lock()
		n := len(q.hold.unrecorded)
		q.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-q.recs.left:
			continue
		case <-deadline.C:
		}
		break
	}
	q.mu.Lock()
	q.recs.gaveUp = true
	q.recs.cancel()
	if n := len(q.hold.unrecorded); n > 0 {
		q.st.log.Warn("jetstream queue closed with dedupe records not stored; their jobs stay queued and are delivered again",
			"downstream", q.name, "jobs", n)
	}
	for m := range q.hold.unrecorded {
		q.letGoLocked(m)
		_ = m.Nak()
		delete(q.hold.unrecorded, m)
	}
	q.mu.Unlock()
	q.recs.wg.Wait()
}
