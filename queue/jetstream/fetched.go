package jetstream

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/queue"
)

// delayLead is how far ahead of its instant a delayed job is held here.
// A job fetched with its instant further ahead is handed back to wait in
// the stream (NakWithDelay until its instant less the lead: the server
// keeps it, for every instance, across a crash of this one); one due
// within the lead is held in the local index's delayed set and joins its
// level when due, to the local clock's precision rather than the server's
// redelivery timer's (which may be late by its own tick and a fetch round
// trip, well under the lead). Two seconds keeps what is held to the jobs
// due in the next two seconds, and each delayed job costs at most one
// hand-back.
const delayLead = 2 * time.Second

// nakedJob is a job handed back to wait out its delay: what the drainer
// knows of it until it is fetched again (Counts).
type nakedJob struct {
	at    time.Time // its instant
	level int
}

// admit takes a fetched message in: a job whose instant is more than
// delayLead ahead is handed back with a delay, counted in the ledger
// first; any other is held in the local index. A message delivered before
// has its hand-backs read from the ledger, and only its other deliveries
// count as tries (a crash's redelivery of a held job counts one: the
// conservative side). It runs in the fetcher, without the queue's lock
// during the ledger's I/O, and reports whether the job is held.
func (q *Queue) admit(m natsjs.Msg) bool {
	job := decode(m, q.name)
	md, err := m.Metadata()
	var seq uint64
	var e ledgerEntry
	if err == nil {
		seq = md.Sequence.Stream
		if md.NumDelivered > 1 {
			if e, err = q.st.ledgerGet(q.ctx, q.stream, seq, md.Timestamp); err != nil {
				q.st.log.Warn("jetstream ledger not read: the job's deliveries count as tries", "stream", q.stream, "error", err.Error())
			}
			job.Attempt, job.Failures = max(job.Attempt-e.count, 0), max(job.Failures-e.count, 0)
		}
	}
	now := time.Now()
	if md != nil && job.NotBefore.After(now.Add(delayLead)) {
		q.nakDelayed(m, job, seq, md.Timestamp, e, now)
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dropNakedLocked(seq)
	if len(q.retries) > 0 {
		q.retryFetchedLocked(seq)
	}
	if e.count > 0 || e.rev != 0 {
		q.ledger[seq] = e
	}
	if q.closed {
		q.handBackLocked([]natsjs.Msg{m})
		return false
	}
	q.index.add(job, m, now)
	return true
}

// nakDelayed hands a job whose instant is more than delayLead ahead back
// to the stream until its instant less the lead, once the hand-back is in
// the ledger (if the ledger cannot take it, the job is handed back all the
// same: its delivery then counts as a try).
func (q *Queue) nakDelayed(m natsjs.Msg, job *queue.Job, seq uint64, stored time.Time, e ledgerEntry, now time.Time) {
	if ne, err := q.st.ledgerPut(q.ctx, q.stream, seq, stored, e.count+1); err != nil {
		q.st.log.Warn("jetstream ledger not written: a delayed job's hand-back counts as a try", "stream", q.stream, "error", err.Error())
	} else {
		e = ne
	}
	q.mu.Lock()
	q.addNakedLocked(seq, nakedJob{at: job.NotBefore, level: queue.Level(job, q.index.levels)})
	if e.rev != 0 {
		q.ledger[seq] = e
	}
	q.mu.Unlock()
	_ = m.NakWithDelay(job.NotBefore.Sub(now) - delayLead)
}

// handBackLocked hands ms, fetched and not tried, back to the stream, in
// a goroutine of its own (Close waits for it): each is counted in the
// ledger, then all are nak'ed, in stream order, and delivered again
// after handBackDelay without counting a try. (The server may still redeliver them out
// of that order: a message it offers to a pull that cannot take it, such
// as a stopped fetcher's, goes to the back of its redelivery queue.)
// Requires q.mu.
func (q *Queue) handBackLocked(ms []natsjs.Msg) {
	if len(ms) == 0 {
		return
	}
	type back struct {
		m      natsjs.Msg
		seq    uint64
		stored time.Time
		e      ledgerEntry
	}
	backs := make([]back, 0, len(ms))
	for _, m := range ms {
		b := back{m: m}
		if md, err := m.Metadata(); err == nil {
			b.seq, b.stored = md.Sequence.Stream, md.Timestamp
			b.e = q.ledger[b.seq]
			delete(q.ledger, b.seq)
		}
		backs = append(backs, b)
	}
	slices.SortFunc(backs, func(a, b back) int { return cmp.Compare(a.seq, b.seq) })
	q.backs.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeRecordWait)
		defer cancel()
		next := make(chan back)
		var workers sync.WaitGroup
		for range min(len(backs), handBackWorkers) {
			workers.Go(func() {
				for b := range next {
					if b.seq == 0 || ctx.Err() != nil {
						continue
					}
					if _, err := q.st.ledgerPut(ctx, q.stream, b.seq, b.stored, b.e.count+1); err != nil {
						q.st.log.Warn("jetstream ledger not written: a job handed back at the stop counts as a try",
							"stream", q.stream, "error", err.Error())
					}
				}
			})
		}
		for _, b := range backs {
			next <- b
		}
		close(next)
		workers.Wait()
		for _, b := range backs {
			_ = b.m.NakWithDelay(q.handBackDelay())
		}
	})
}

// handBackWorkers bounds the ledger writes of a hand-back under way at
// once.
const handBackWorkers = 16

// forgetLocked books m's leaving the stream (acked or termed): its level's
// count, and its ledger entry, deleted in the background. Requires q.mu.
func (q *Queue) forgetLocked(m natsjs.Msg) {
	if len(q.levelDepth) > 0 {
		q.levelDepth[levelOfSubject(q.subject, m.Subject(), len(q.levelDepth))].remove()
	}
	if len(q.ledger) == 0 {
		return
	}
	md, err := m.Metadata()
	if err != nil {
		return
	}
	e, ok := q.ledger[md.Sequence.Stream]
	if !ok {
		return
	}
	delete(q.ledger, md.Sequence.Stream)
	if e.rev != 0 {
		q.backs.Go(func() { _ = q.st.ledgerDelete(context.Background(), e.rev) })
	}
}
