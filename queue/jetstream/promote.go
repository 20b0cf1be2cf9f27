package jetstream

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
)

// The promoter: which job of the stream goes into the window next.
//
// It knows each subject of the stream (a level, or a key at a level)
// by a small entry, never the jobs on it: the subject's count (the last
// refresh's, plus this instance's stores since), how many of its jobs are
// in the window, the last sequence promoted (a cursor: the next job is the
// first after it, read from the stream with a get by subject), and at
// most one job read and waiting for its turn. It fills the window in the
// memory backend's order: the most urgent level with a job to promote;
// within a level, deficit round robin between the keys' subjects (each
// visit adds the key's weight, a job costs its cost); FIFO within a
// subject. The local index then orders what the window holds (retries
// first, delayed jobs held until due), exactly as before.

// source is one subject of a queue's stream as the promoter knows it.
// Requires the queue's mutex.
type source struct {
	subject string
	place
	count   int                    // messages on it, best known
	out     int                    // of them, promoted and still in the stream
	stored  uint64                 // the last sequence this instance stored on it
	cursor  uint64                 // the last sequence read
	buf     []*natsjs.RawStreamMsg // read, waiting for their turn, in order
	deficit int
	visited bool // given its quantum on this visit
	ringed  bool
}

// pending reports whether the source may have a job to promote.
func (s *source) pending() bool { return len(s.buf) > 0 || s.count > s.out+len(s.buf) }

// sources are a queue's subjects, and for each level those that may have
// jobs to promote, in turn. Requires the queue's mutex.
type sources struct {
	by   map[string]*source
	ring [][]*source
	turn []int
}

// configure sets the levels, placing every source again.
func (ss *sources) configure(base string, levels int) {
	if ss.by == nil {
		ss.by = map[string]*source{}
	}
	ss.ring, ss.turn = make([][]*source, levels), make([]int, levels)
	for _, s := range ss.by {
		s.place, s.ringed, s.visited = placeOf(base, s.subject, levels), false, false
		ss.ringLocked(s)
	}
}

// get returns subject's source, made if new.
func (ss *sources) get(base, subject string) *source {
	s, ok := ss.by[subject]
	if !ok {
		s = &source{subject: subject, place: placeOf(base, subject, len(ss.ring))}
		ss.by[subject] = s
	}
	return s
}

// ringLocked puts s in its level's turn when it may have jobs to promote.
func (ss *sources) ringLocked(s *source) {
	if !s.ringed && s.pending() && s.level < len(ss.ring) {
		s.ringed = true
		ss.ring[s.level] = append(ss.ring[s.level], s)
	}
}

// current is the source whose turn it is: of the most urgent level with a
// source that may have a job, the one the round robin is at, given its
// weight when its visit begins. Nil: none.
func (ss *sources) current(weight func(string) int) *source {
	for l := range ss.ring {
		r := ss.ring[l]
		for len(r) > 0 {
			i := ss.turn[l] % len(r)
			s := r[i]
			if !s.pending() {
				s.ringed, s.visited, s.deficit = false, false, 0
				r = append(r[:i], r[i+1:]...)
				ss.ring[l] = r
				continue
			}
			ss.turn[l] = i
			if !s.visited {
				s.visited = true
				s.deficit += weight(s.key)
			}
			return s
		}
	}
	return nil
}

// pass ends s's visit: the turn goes to the next source of its level.
func (ss *sources) pass(s *source) {
	s.visited = false
	if s.level < len(ss.turn) {
		ss.turn[s.level]++
	}
}

// alone reports whether s is the only source of its level that may have
// jobs (then it needs no deficit: nothing else could go first).
func (ss *sources) alone(s *source) bool {
	return s.level < len(ss.ring) && len(ss.ring[s.level]) == 1
}

// refreshed takes the stream's per-subject counts, answered with the
// stream's last sequence: a subject this instance stored on since keeps
// at least one job more; a subject with nothing known is forgotten.
func (ss *sources) refreshed(base string, counts map[string]uint64, lastSeq uint64) {
	for subj, n := range counts {
		ss.get(base, subj).count = int(n)
	}
	for subj, s := range ss.by {
		if _, ok := counts[subj]; !ok {
			s.count = 0
		}
		if s.stored > lastSeq {
			s.count++
		}
		s.out = min(s.out, s.count)
		if s.count == 0 && len(s.buf) == 0 && !s.ringed {
			delete(ss.by, subj)
			continue
		}
		ss.ringLocked(s)
	}
}

// reset forgets the cursors: every job of the stream may be promoted
// again (a duplicate token is stored once, and dropped by the fetcher).
func (ss *sources) reset() {
	for _, s := range ss.by {
		s.cursor, s.out, s.buf = 0, 0, nil
		ss.ringLocked(s)
	}
}

// promotedJob is a job promoted by this instance, kept until its token is
// fetched (here, or expired: the token went to another instance).
type promotedJob struct {
	msg *natsjs.RawStreamMsg
	at  time.Time
}

// promotedTTL is how long a promoted job is kept for its token.
func (q *Queue) promotedTTL() time.Duration { return 2*q.fetchWait() + time.Second }

// nudge wakes the promoter. Never blocks.
func (q *Queue) nudge() {
	select {
	case q.pwake <- struct{}{}:
	default:
	}
}

// weightLocked is key's weight between keys (1 unless configured).
func (q *Queue) weightLocked(key string) int {
	if w := q.weights[key]; w > 0 {
		return w
	}
	return 1
}

// roomLocked is how many jobs more the window may take: the window less
// the jobs promoted and not fetched, held ready, or leaving (a job waiting
// for its record holds its place). Jobs in flight (at most the lane's
// concurrency) and jobs waiting out a delay or a retry's backoff take
// none. Requires q.mu.
func (q *Queue) roomLocked(now time.Time) int {
	in := len(q.promoted) + q.index.len() - q.index.delayedAt(now) + len(q.unrecorded)
	return q.windowLocked() - in
}

// mayPromoteLocked reports whether this instance fills the window: it is
// the pinned drainer, or no instance is. Requires q.mu.
func (q *Queue) mayPromoteLocked() bool { return q.pinNow == "" || q.pinNow == q.pinSeen }

// promote is the promoter goroutine: it fills the window whenever there
// is room and a job to promote, and otherwise waits to be nudged (a store,
// a job leaving, a refresh) or for the next refresh.
func (q *Queue) promote() {
	t := time.NewTimer(refreshEvery)
	defer t.Stop()
	for q.ctx.Err() == nil {
		if q.promoteSome() {
			continue
		}
		t.Reset(refreshEvery)
		select {
		case <-q.ctx.Done():
		case <-q.pwake:
		case <-t.C:
		}
	}
}

// pick is a job chosen for the window, from src.
type pick struct {
	src *source
	job *natsjs.RawStreamMsg
}

// maxRead bounds the jobs one read of a subject asks for.
const maxRead = 64

// promoteSome promotes jobs while the window has room, reading the
// subjects whose turn it is as it goes, and reports whether it promoted
// any. Each round's tokens are stored together, their PubAcks checked
// while the next rounds go on (at most maxRounds outstanding), and the
// subjects to read next are read together.
func (q *Queue) promoteSome() bool {
	promoted := false
	for q.ctx.Err() == nil {
		if !q.settleRounds(len(q.rounds) >= maxRounds) {
			return promoted
		}
		q.mu.Lock()
		picks, need := q.pickLocked(time.Now())
		q.mu.Unlock()
		switch {
		case len(picks) > 0:
			q.sendTokens(picks)
			promoted = true
		case len(need) > 0:
			if !q.readAll(need) {
				return promoted
			}
		default:
			q.settleRounds(true)
			return promoted
		}
	}
	return promoted
}

// toRead is a source to read: up to n jobs after cursor.
type toRead struct {
	src    *source
	cursor uint64
	n      int
}

// maxReads bounds the subjects read at once.
const maxReads = 32

// pickLocked chooses the jobs for the window's room, in the order, from
// what the sources have read; each is booked promoted (its token not
// stored yet). When the source whose turn it is has nothing read, the
// choice stops there: need is that source and the next ones of its level
// with nothing read (at most maxReads), to be read before the order goes
// on. Requires q.mu.
func (q *Queue) pickLocked(now time.Time) (picks []pick, need []toRead) {
	if q.s == nil || q.closed || !q.mayPromoteLocked() {
		return nil, nil
	}
	for room := q.roomLocked(now); room > 0; {
		src := q.srcs.current(q.weightLocked)
		if src == nil {
			break
		}
		if len(src.buf) == 0 {
			if len(picks) == 0 {
				need = q.toReadLocked(src)
			}
			break
		}
		head := src.buf[0]
		cost := jobCost(head)
		if cost > src.deficit && !q.srcs.alone(src) {
			q.srcs.pass(src)
			continue
		}
		src.buf[0] = nil
		src.buf = src.buf[1:]
		q.buffered--
		src.out++
		if src.deficit = max(src.deficit-cost, 0); src.deficit == 0 {
			q.srcs.pass(src)
		}
		// Known before the token is stored: its fetch may come first.
		q.promoted[head.Sequence] = promotedJob{msg: head, at: now}
		picks = append(picks, pick{src, head})
		room--
	}
	return picks, need
}

// toReadLocked is src, whose turn it is, and the sources after it in its
// level's turn that have nothing read, at most maxReads. Requires q.mu.
func (q *Queue) toReadLocked(src *source) []toRead {
	need := []toRead{{src, src.cursor, q.readSizeLocked(src)}}
	ring := q.srcs.ring[src.level]
	for i := 1; i < len(ring) && len(need) < maxReads; i++ {
		s := ring[(q.srcs.turn[src.level]+i)%len(ring)]
		if s != src && len(s.buf) == 0 && s.pending() {
			need = append(need, toRead{s, s.cursor, q.readSizeLocked(s)})
		}
	}
	return need
}

// readAll reads the sources in need at once; it reports whether the
// promoter may go on (no read failed).
func (q *Queue) readAll(need []toRead) bool {
	if len(need) == 1 {
		return q.read(need[0].src, need[0].cursor, need[0].n)
	}
	var wg sync.WaitGroup
	var failed atomic.Bool
	for _, r := range need {
		wg.Go(func() {
			if !q.read(r.src, r.cursor, r.n) {
				failed.Store(true)
			}
		})
	}
	wg.Wait()
	return !failed.Load()
}

// readSizeLocked is how many jobs to read of src at once: its share of
// the window among its level's subjects (a level's or a key's jobs are
// spread over the stream: a read of many of one key's jobs among many
// keys touches much of the stream for jobs whose turn is far off), within
// what the window leaves unread, at least one and at most maxRead.
// Requires q.mu.
func (q *Queue) readSizeLocked(src *source) int {
	share := q.windowLocked() / max(len(q.srcs.ring[src.level]), 1)
	return min(max(min(share, q.windowLocked()-q.buffered), 1), maxRead)
}

// read reads up to n jobs of src after cursor into its buffer (unless
// src was reset meanwhile); a subject with none past the cursor has its
// count corrected. It reports whether the promoter may go on.
func (q *Queue) read(src *source, cursor uint64, n int) bool {
	ctx, cancel := context.WithTimeout(q.ctx, RequestTimeout)
	msgs, left, err := q.st.readBatch(ctx, q.stream, src.subject, cursor+1, n)
	cancel()
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case gone(err): // nothing past the cursor: the count was stale
		src.count = src.out + len(src.buf)
	case err != nil:
		q.st.log.Debug("jetstream promotion read failed; retrying", "stream", q.stream, "subject", src.subject, "error", err.Error())
		return false
	case src.cursor == cursor && len(msgs) > 0: // else reset meanwhile: read again
		src.buf = append(src.buf, msgs...)
		q.buffered += len(msgs)
		src.cursor = msgs[len(msgs)-1].Sequence
		if left >= 0 {
			src.count = src.out + len(src.buf) + int(left)
		} else {
			src.count = max(src.count, src.out+len(src.buf))
		}
	}
	return true
}

// round is the tokens of one pickLocked, stored asynchronously: the
// promoter goes on while their PubAcks come.
type round struct {
	picks []pick
	futs  []natsjs.PubAckFuture // nil: not sent
	next  int                   // the first future not answered yet
}

// maxRounds bounds the rounds whose PubAcks are awaited at once.
const maxRounds = 8

// sendTokens stores the picks' tokens (a job due more than the lead ahead
// gets its level's delayed token) without waiting for their PubAcks
// (settleRounds checks them).
func (q *Queue) sendTokens(picks []pick) {
	now := time.Now()
	r := round{picks: picks, futs: make([]natsjs.PubAckFuture, len(picks))}
	for i, p := range picks {
		subj := q.st.windowSubject(q.name)
		if unixNano(p.job.Header.Get(hdrNotBefore)).After(now.Add(delayLead)) {
			subj = q.st.delayedSubject(q.name, p.src.level)
		}
		f, err := q.st.js.PublishMsgAsync(q.st.token(subj, q.name, p.job.Sequence, ""))
		if err != nil {
			break // the rest stay nil: failed
		}
		r.futs[i] = f
	}
	q.rounds = append(q.rounds, r)
}

// settleRounds checks the rounds' PubAcks in order: those answered by
// now, or all of them (waiting at most RequestTimeout) when wait. A token
// not stored undoes its pick and every pick after it of its source, in
// its round and the later ones (see undo). It reports whether every
// token checked was stored.
func (q *Queue) settleRounds(wait bool) bool {
	var deadline <-chan time.Time
	if wait {
		t := time.NewTimer(RequestTimeout)
		defer t.Stop()
		deadline = t.C
	}
	for len(q.rounds) > 0 {
		r := &q.rounds[0]
		for ; r.next < len(r.futs); r.next++ {
			f := r.futs[r.next]
			if f == nil {
				q.undo(errors.New("not sent"))
				return false
			}
			var err error
			if wait {
				select {
				case <-f.Ok():
				case err = <-f.Err():
				case <-deadline:
					err = context.DeadlineExceeded
				case <-q.ctx.Done():
					err = q.ctx.Err()
				}
			} else {
				select {
				case <-f.Ok():
				case err = <-f.Err():
				default:
					return true // not answered yet
				}
			}
			if err != nil {
				q.undo(err)
				return false
			}
		}
		q.rounds[0] = round{}
		q.rounds = q.rounds[1:]
	}
	return true
}

// undo forgets the picks of the first round from its first unanswered
// token on, and those of the later rounds: each source concerned is read
// again from the first of them (the tokens stored meanwhile are answered
// as duplicates then, and the fetcher drops a second token of a job).
func (q *Queue) undo(err error) {
	q.st.log.Debug("jetstream promotion failed; retrying", "stream", q.stream, "error", err.Error())
	var undone []pick
	for i, r := range q.rounds {
		if i == 0 {
			undone = append(undone, r.picks[r.next:]...)
			continue
		}
		undone = append(undone, r.picks...)
	}
	q.rounds = q.rounds[:0]
	q.mu.Lock()
	defer q.mu.Unlock()
	first := map[*source]uint64{}
	for _, p := range undone {
		if f, seen := first[p.src]; !seen || p.job.Sequence < f {
			first[p.src] = p.job.Sequence
		}
	}
	for _, p := range undone {
		delete(q.promoted, p.job.Sequence)
		p.src.out = max(p.src.out-1, 0)
	}
	for src, f := range first {
		q.buffered -= len(src.buf)
		src.buf, src.cursor = nil, min(src.cursor, f-1)
		q.srcs.ringLocked(src)
	}
}

// sendToken stores the token of the job at seq on subject (suffix: see
// token) and waits for its PubAck (a duplicate's too: the job has its
// token).
func (q *Queue) sendToken(subject string, seq uint64, suffix string) error {
	ctx, cancel := context.WithTimeout(q.ctx, RequestTimeout)
	defer cancel()
	_, err := q.st.js.PublishMsg(ctx, q.st.token(subject, q.name, seq, suffix))
	return err
}

// jobCost is a stored job's cost (its Shaper-Cost; absent = 1).
func jobCost(m *natsjs.RawStreamMsg) int {
	if c, err := strconv.Atoi(m.Header.Get(hdrCost)); err == nil && c > 1 {
		return c
	}
	return 1
}

// expirePromotedLocked forgets promoted jobs whose token was not fetched
// here in time (another instance drains). Requires q.mu.
func (q *Queue) expirePromotedLocked(now time.Time) {
	for seq, p := range q.promoted {
		if now.Sub(p.at) > q.promotedTTL() {
			delete(q.promoted, seq)
		}
	}
}
