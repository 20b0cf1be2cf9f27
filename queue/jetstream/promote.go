package jetstream

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/queue"
)

// The promoter: which job of the stream goes into the window next.
//
// It knows each subject of the stream (a level, or a key at a level)
// by a small entry (sources.go), never the jobs on it: the subject's count
// (the last refresh's, plus this instance's stores since), how many of its
// jobs are in the window, the last sequence read (a cursor: the next jobs
// are the first after it, read from the stream by a direct get of the
// subject, read.go), and the jobs read and waiting for their turn (its
// share of the window at most). Their tokens are stored a round at a time
// (rounds.go). It fills the window in the
// memory backend's order: the most urgent level with a job to promote;
// within a level, deficit round robin between the keys' subjects (each
// visit adds the key's weight, a job costs its cost); FIFO within a
// subject. The local index then orders what the window holds (retries
// first, delayed jobs held until due), exactly as before.

// promoter is the drainer's reading of the queue's stream: which jobs go
// into the window next. Requires the queue's mutex, but
// rounds, which only the promoter goroutine touches.
type promoter struct {
	wake     chan struct{}          // cap 1: the promoter may have work
	srcs     sources                // the stream's subjects
	promoted map[uint64]promotedJob // promoted here, token not fetched yet, by job sequence
	buffered int                    // jobs the sources read and hold for their turn
	weights  map[string]int         // fairness: weight by key
	pinSeen  string                 // the pin id of this instance's last fetched token
	pinNow   string                 // the pinned instance's id, as the last refresh read it
	// windowEmpty says the last refresh found no token in the window,
	// pending or held by any instance.
	windowEmpty bool
	// delivered is the window consumer's last delivered token sequence,
	// unchanged since deliveredAt; stalled says for too long, with jobs
	// waiting (watchDelivered).
	delivered   uint64
	deliveredAt time.Time
	stalled     bool
	rounds      []round // tokens sent, PubAcks not all checked
	in          []int   // pickLocked's scratch: the window's jobs by level
}

// promotedJob is a job promoted by this instance, kept until its token is
// fetched (here, or expired: the token went to another instance).
type promotedJob struct {
	msg   *natsjs.RawStreamMsg
	at    time.Time
	level int // its subject's
}

// promotedTTL is how long a promoted job is kept for its token.
func (q *Queue) promotedTTL() time.Duration { return 2*q.fetchWait() + time.Second }

// nudge wakes the promoter. Never blocks.
func (q *Queue) nudge() {
	select {
	case q.pro.wake <- struct{}{}:
	default:
	}
}

// weightLocked is key's weight between keys (1 unless configured).
func (q *Queue) weightLocked(key string) int {
	if w := q.pro.weights[key]; w > 0 {
		return w
	}
	return 1
}

// inWindowLocked fills in, one count per level, with the window's jobs
// of each level (promoted and not fetched, or held ready) and returns
// the jobs leaving (a job waiting for its record holds its place). Jobs
// in flight (at most the lane's concurrency) and jobs waiting out a delay
// or a retry's backoff take no place. Requires q.mu.
func (q *Queue) inWindowLocked(now time.Time, in []int) int {
	q.hold.index.kind.(queue.Counter).Counts(now, in)
	for _, p := range q.pro.promoted {
		in[min(p.level, len(in)-1)]++
	}
	return len(q.hold.unrecorded)
}

// roomFor is how many jobs of level l the window may take more: the
// window less its jobs of level l and the more urgent levels, and those
// leaving. A more urgent job takes a place at once in a window full of
// less urgent ones (the window then holds more, at most the window per
// level), so that it starts next, as on a memory queue.
func roomFor(l, window, leaving int, in []int) int {
	n := leaving
	for _, c := range in[:min(l+1, len(in))] {
		n += c
	}
	return window - n
}

// mayPromoteLocked reports whether this instance fills the window: it is
// the pinned drainer, or no instance is, or the window holds no token at
// all (a pin may outlive a drainer that died with nothing to deliver;
// promoting then is harmless, a job's second token being refused as a
// duplicate, and the instance that pulls the first token is pinned).
// Requires q.mu.
func (q *Queue) mayPromoteLocked() bool {
	return q.pro.pinNow == "" || q.pro.pinNow == q.pro.pinSeen || q.pro.windowEmpty || q.pro.stalled
}

// watchDelivered takes the window consumer's last delivered token
// sequence, read at now, and whether the queue holds jobs: a window that
// delivered nothing for stall while jobs wait is stalled, and then every
// instance promotes (the pinned one may have died holding no token, its
// pin outliving it; a second token of a job is refused as a duplicate,
// and the instance that pulls the first is pinned). Requires the queue's
// mutex.
func (p *promoter) watchDelivered(last uint64, jobs bool, now time.Time, stall time.Duration) {
	if last != p.delivered || !jobs || p.deliveredAt.IsZero() {
		p.delivered, p.deliveredAt, p.stalled = last, now, false
		return
	}
	p.stalled = now.Sub(p.deliveredAt) >= stall
}

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
		case <-q.pro.wake:
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
		if !q.settleRounds(len(q.pro.rounds) >= maxRounds) {
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
	// The delayed jobs first, as they are read: their tokens take no room.
	for len(picks) < maxRead {
		src := q.pro.srcs.nextDelayed()
		if src == nil {
			break
		}
		if len(src.buf) == 0 {
			if len(picks) == 0 {
				need = []toRead{{src, src.cursor, maxRead}}
			}
			return picks, need
		}
		for len(src.buf) > 0 && len(picks) < maxRead {
			picks = append(picks, q.bookLocked(src, now))
		}
	}
	in := q.pro.in[:0]
	for range q.hold.index.levels {
		in = append(in, 0)
	}
	q.pro.in = in
	leaving := q.inWindowLocked(now, in)
	for {
		src := q.pro.srcs.current(q.weightLocked)
		if src == nil || roomFor(src.level, q.windowLocked(), leaving, in) <= 0 {
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
		if cost > src.deficit && !q.pro.srcs.alone(src) {
			q.pro.srcs.pass(src)
			continue
		}
		picks = append(picks, q.bookLocked(src, now))
		in[min(src.level, len(in)-1)]++
		if src.deficit = max(src.deficit-cost, 0); src.deficit == 0 {
			q.pro.srcs.pass(src)
		}
	}
	return picks, need
}

// bookLocked takes src's first job read as promoted (known before its
// token is stored: its fetch may come first). Requires q.mu.
func (q *Queue) bookLocked(src *source, now time.Time) pick {
	head := src.buf[0]
	src.buf[0] = nil
	src.buf = src.buf[1:]
	q.pro.buffered--
	src.out++
	q.pro.promoted[head.Sequence] = promotedJob{msg: head, at: now, level: src.level}
	return pick{src, head}
}

// toReadLocked is src, whose turn it is, and the sources after it in its
// level's turn that have nothing read, at most maxReads. Requires q.mu.
func (q *Queue) toReadLocked(src *source) []toRead {
	need := []toRead{{src, src.cursor, q.readSizeLocked(src)}}
	ring := q.pro.srcs.ring[src.level]
	for i := 1; i < len(ring) && len(need) < maxReads; i++ {
		s := ring[(q.pro.srcs.turn[src.level]+i)%len(ring)]
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
	share := q.windowLocked() / max(len(q.pro.srcs.ring[src.level]), 1)
	return min(max(min(share, q.windowLocked()-q.pro.buffered), 1), maxRead)
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
		q.pro.buffered += len(msgs)
		src.cursor = msgs[len(msgs)-1].Sequence
		if left >= 0 {
			src.count = src.out + len(src.buf) + int(left)
		} else {
			src.count = max(src.count, src.out+len(src.buf))
		}
	}
	return true
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
	for seq, p := range q.pro.promoted {
		if now.Sub(p.at) > q.promotedTTL() {
			delete(q.pro.promoted, seq)
		}
	}
}
