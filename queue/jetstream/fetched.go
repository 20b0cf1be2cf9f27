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

// holdings are the jobs of the window this instance holds, from the
// fetch of their tokens until the tokens leave its hands (acked, or
// nak'ed to wait out a backoff or a delay, or handed back). Requires the
// queue's mutex.
type holdings struct {
	index index                     // fetched, not taken
	taken map[*queue.Job]natsjs.Msg // started, not yet acked or termed
	acks  heldAcks                  // delivered, ack held to the end of the job's slot (Ack)
	// unrecorded are due to leave the stream (delete, then the token's ack
	// or term) once their dedupe record is stored; see settleLocked.
	unrecorded map[natsjs.Msg]*recordWrite
	origins    map[uint64]struct{}      // their jobs, by sequence in the queue's stream
	ledger     map[uint64]ledgerEntry   // hand-backs of tokens held or taken, by token sequence (count > 0)
	retries    map[uint64]*waitingRetry // nak'ed to wait out their backoff, by token sequence, until fetched
	retriesDue int                      // of retries, those due: room in the window
}

// pinHeader is the header of a pinned consumer's delivery that names the
// pin.
const pinHeader = "Nats-Pin-Id"

// admit takes a fetched token in: its job is the one the promoter read
// (or, promoted by another instance, read from the stream now; a job
// gone from the stream, or held here already under another token, drops
// the token). A job whose instant is more than delayLead ahead is handed
// back with a delay, counted in the ledger first; any other is held in
// the local index. A token delivered before has its hand-backs read from
// the ledger, and only its other deliveries count as tries (a crash's
// redelivery of a held job counts one: the conservative side). It runs in
// the fetcher, without the queue's lock during I/O, and reports whether
// the job is held. A job promoted here keeps its place in the window
// (q.pro.promoted) until it is held or its token is dropped: forgotten
// sooner, the promoter would see room while the job is read, and promote
// one more.
func (q *Queue) admit(t natsjs.Msg) bool {
	seq, ok := origin(t)
	if !ok {
		_ = t.TermWithReason("shaperd: not a token")
		return false
	}
	q.mu.Lock()
	if pin := t.Headers().Get(pinHeader); pin != "" {
		q.pro.pinSeen = pin
	}
	p, cached := q.pro.promoted[seq]
	_, dup := q.hold.origins[seq]
	if dup {
		delete(q.pro.promoted, seq)
	}
	s := q.s
	q.mu.Unlock()
	if dup {
		_ = t.Ack()
		return false
	}
	raw := p.msg
	if !cached {
		ctx, cancel := context.WithTimeout(q.ctx, RequestTimeout)
		r, err := s.GetMsg(ctx, seq)
		cancel()
		switch {
		case gone(err): // it left the stream: the token is spent
			_ = t.Ack()
			return false
		case err != nil:
			q.st.log.Debug("jetstream job of a token not read; delivered again", "stream", q.stream, "error", err.Error())
			_ = t.NakWithDelay(retryEvery)
			return false
		}
		raw = r
	}
	m := &jobMsg{Msg: t, job: raw}
	job := decode(m, q.name, q.epochNow())
	md, err := m.Metadata()
	var tseq uint64
	var e ledgerEntry
	if err == nil {
		tseq = md.Sequence.Stream
		if md.NumDelivered > 1 {
			if e, err = q.st.ledgerGet(q.ctx, q.st.WindowStream(), tseq, md.Timestamp); err != nil {
				q.st.log.Warn("jetstream ledger not read: the job's deliveries count as tries", "stream", q.stream, "error", err.Error())
			}
			job.Attempt, job.Failures = max(job.Attempt-e.count, 0), max(job.Failures-e.count, 0)
		}
	}
	now := time.Now()
	if md != nil && job.NotBefore.After(now.Add(delayLead)) {
		q.mu.Lock()
		delete(q.pro.promoted, seq) // a delayed job takes no room
		q.mu.Unlock()
		q.nakDelayed(m, tseq, md.Timestamp, e, job.NotBefore.Sub(now)-delayLead)
		return false
	}
	if _, delayed := delayedLevel(q.st.windowSubject(q.name), t.Subject()); delayed && job.Failures == 0 && q.moveDue(t, raw, e) {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.pro.promoted, seq) // held now, or handed back
	if len(q.hold.retries) > 0 {
		q.retryFetchedLocked(tseq)
	}
	if e.count > 0 || e.rev != 0 {
		q.hold.ledger[tseq] = e
	}
	if q.closed {
		q.handBackLocked([]natsjs.Msg{m})
		return false
	}
	q.hold.origins[seq] = struct{}{}
	q.hold.index.add(job, m, now)
	q.nudge() // a delayed job held takes no room
	return true
}

// letGoLocked forgets that this instance holds m's token (acked, nak'ed
// or handed back). Requires q.mu.
func (q *Queue) letGoLocked(m natsjs.Msg) {
	if j, ok := m.(*jobMsg); ok {
		delete(q.hold.origins, j.seq())
	}
}

// nakDelayed hands the token of a job whose instant is more than
// delayLead ahead back to the window for d (until its instant less the
// lead), once the hand-back is in the ledger (if the ledger cannot take
// it, the token is handed back all the same: its delivery then counts as
// a try). Nothing of the job stays here: the token's next delivery reads
// the ledger again.
func (q *Queue) nakDelayed(m natsjs.Msg, seq uint64, stored time.Time, e ledgerEntry, d time.Duration) {
	if _, err := q.st.ledgerPut(q.ctx, q.st.WindowStream(), seq, stored, e.count+1); err != nil {
		q.st.log.Warn("jetstream ledger not written: a delayed job's hand-back counts as a try", "stream", q.stream, "error", err.Error())
	}
	_ = m.NakWithDelay(d)
	q.nudge() // its room in the window is free
}

// moveDue moves a delayed job due within the lead, never tried, from its
// delayed token to a ready one (the delayed tokens count the jobs waiting
// for their instant): the new token is stored, then the old one acked and
// its ledger entry deleted. It reports whether it moved the job; if not,
// the old token serves.
func (q *Queue) moveDue(t natsjs.Msg, job *natsjs.RawStreamMsg, e ledgerEntry) bool {
	q.mu.Lock()
	q.pro.promoted[job.Sequence] = promotedJob{msg: job, at: time.Now(), level: levelOfSubject(q.subject, job.Subject, q.hold.index.levels)}
	q.mu.Unlock()
	if err := q.sendToken(q.st.windowSubject(q.name), job.Sequence, dueSuffix); err != nil {
		q.mu.Lock()
		delete(q.pro.promoted, job.Sequence)
		q.mu.Unlock()
		return false
	}
	_ = t.Ack()
	if e.rev != 0 {
		q.backs.Go(func() { _ = q.st.ledgerDelete(context.Background(), e.rev) })
	}
	return true
}

// dueSuffix makes the Nats-Msg-Id of a delayed job's ready token.
const dueSuffix = ":due"

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
		q.letGoLocked(m)
		b := back{m: m}
		if md, err := m.Metadata(); err == nil {
			b.seq, b.stored = md.Sequence.Stream, md.Timestamp
			b.e = q.hold.ledger[b.seq]
			delete(q.hold.ledger, b.seq)
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
					if _, err := q.st.ledgerPut(ctx, q.st.WindowStream(), b.seq, b.stored, b.e.count+1); err != nil {
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

// forgetLocked books m's leaving the stream (its job deleted, its token
// acked or termed): its level's and its subject's counts, and its ledger
// entry, deleted in the background. Requires q.mu.
func (q *Queue) forgetLocked(m natsjs.Msg) {
	q.letGoLocked(m)
	if len(q.cnt.levels) > 0 {
		q.cnt.levels[levelOfSubject(q.subject, m.Subject(), len(q.cnt.levels))].remove()
	}
	if src, ok := q.pro.srcs.by[m.Subject()]; ok {
		src.count = max(src.count-1, 0)
		src.out = max(src.out-1, 0)
	}
	q.nudge()
	if len(q.hold.ledger) == 0 {
		return
	}
	md, err := m.Metadata()
	if err != nil {
		return
	}
	e, ok := q.hold.ledger[md.Sequence.Stream]
	if !ok {
		return
	}
	delete(q.hold.ledger, md.Sequence.Stream)
	if e.rev != 0 {
		q.backs.Go(func() { _ = q.st.ledgerDelete(context.Background(), e.rev) })
	}
}
