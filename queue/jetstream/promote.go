package jetstream

import (
	"context"
	"strconv"
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
	count   int                  // messages on it, best known
	out     int                  // of them, promoted and still in the stream
	stored  uint64               // the last sequence this instance stored on it
	cursor  uint64               // the last sequence promoted
	head    *natsjs.RawStreamMsg // read, waiting for its turn
	deficit int
	visited bool // given its quantum on this visit
	ringed  bool
}

// pending reports whether the source may have a job to promote.
func (s *source) pending() bool { return s.head != nil || s.count > s.out }

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
		if s.count == 0 && s.head == nil && !s.ringed {
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
		s.cursor, s.out, s.head = 0, 0, nil
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

// promoteSome promotes jobs while the window has room, and reports
// whether it promoted any.
func (q *Queue) promoteSome() bool {
	any := false
	for q.ctx.Err() == nil {
		q.mu.Lock()
		s := q.s
		var src *source
		if s != nil && !q.closed && q.mayPromoteLocked() && q.roomLocked(time.Now()) > 0 {
			src = q.srcs.current(q.weightLocked)
		}
		var head *natsjs.RawStreamMsg
		var cursor uint64
		if src != nil {
			head, cursor = src.head, src.cursor
		}
		q.mu.Unlock()
		if src == nil {
			return any
		}
		if head == nil {
			m, err := q.readNext(s, src.subject, cursor)
			q.mu.Lock()
			switch {
			case gone(err): // nothing past the cursor: the count was stale
				src.count = src.out
				q.srcs.pass(src)
			case err != nil:
				q.mu.Unlock()
				q.st.log.Debug("jetstream promotion read failed; retrying", "stream", q.stream, "error", err.Error())
				return any
			case src.cursor == cursor: // else reset meanwhile: read again
				src.head = m
			}
			q.mu.Unlock()
			continue
		}
		q.mu.Lock()
		cost := jobCost(head)
		if cost > src.deficit && !q.srcs.alone(src) {
			q.srcs.pass(src)
			q.mu.Unlock()
			continue
		}
		// Known before the token is stored: its fetch may come before
		// sendToken returns.
		q.promoted[head.Sequence] = promotedJob{msg: head, at: time.Now()}
		q.mu.Unlock()
		subj := q.st.windowSubject(q.name)
		if unixNano(head.Header.Get(hdrNotBefore)).After(time.Now().Add(delayLead)) {
			subj = q.st.delayedSubject(q.name, src.level)
		}
		err := q.sendToken(subj, head.Sequence, "")
		q.mu.Lock()
		if err != nil {
			delete(q.promoted, head.Sequence)
			q.mu.Unlock()
			q.st.log.Debug("jetstream promotion failed; retrying", "stream", q.stream, "error", err.Error())
			return any
		}
		if src.head == head {
			src.head, src.cursor = nil, head.Sequence
			src.out++
			src.deficit = max(src.deficit-cost, 0)
			if src.deficit == 0 {
				q.srcs.pass(src)
			}
		}
		q.mu.Unlock()
		any = true
	}
	return any
}

// readNext reads the first job after seq on subject.
func (q *Queue) readNext(s natsjs.Stream, subject string, seq uint64) (*natsjs.RawStreamMsg, error) {
	ctx, cancel := context.WithTimeout(q.ctx, RequestTimeout)
	defer cancel()
	return s.GetMsg(ctx, seq+1, natsjs.WithGetMsgSubject(subject))
}

// sendToken stores the token of the job at seq on subject and waits for
// its PubAck (a duplicate's too: the job has its token).
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
