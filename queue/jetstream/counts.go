package jetstream

import (
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/queue"
)

// Levels is the number of priority levels (queue.Counter).
func (q *Queue) Levels() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.index.levels
}

// Counts fills levels with the jobs of each level not delayed and returns
// the delayed jobs whose instant is after now (queue.Counter). The levels
// come from the stream: with levels and no fairness, each level's
// subject's count (refreshed every 500 ms, adjusted for this instance's
// stores and acks; jobs in flight included until acked); under fairness,
// the levels of the jobs this instance holds, the rest of the stream
// counted in the least urgent level. The delayed jobs are those the
// drainer knows of: held until due, or handed back to wait in the stream.
// An instance that is not the pinned drainer knows of none, and counts
// every job in its level (fairness: the least urgent). It does not
// allocate once its scratch space has grown to the levels.
func (q *Queue) Counts(now time.Time, levels []int) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := q.index.levels
	n := min(len(levels), k)
	if cap(q.scratch) < 2*k {
		q.scratch = make([]int, 2*k)
	}
	delayedBy, held := q.scratch[:k], q.scratch[k:2*k]
	clear(delayedBy)
	delayed := 0
	for seq, nj := range q.naked {
		if !nj.at.After(now) { // redelivered by now (to this instance or another)
			delete(q.naked, seq)
			continue
		}
		delayedBy[min(nj.level, k-1)]++
		delayed++
	}
	if q.index.delayed > 0 {
		for job, h := range q.index.msgs {
			if h.notBefore.After(now) {
				delayedBy[queue.Level(job, k)]++
				delayed++
			}
		}
	}
	switch {
	case len(q.levelDepth) == k:
		for l := range n {
			levels[l] = max(q.levelDepth[l].n-delayedBy[l], 0)
		}
	default:
		clear(held)
		q.index.kind.(queue.Counter).Counts(now, held)
		rest := q.depth.n - delayed
		for l := range n {
			if l < k-1 {
				levels[l] = held[l]
				rest -= held[l]
			}
		}
		if n == k {
			levels[k-1] = max(rest, 0)
		}
	}
	return delayed
}

// notAheadLocked is the jobs the counts of Ahead hold (the stream's, or
// with levels those of job's level and the more urgent ones) that do not
// start before job, offered at at, as the drainer knows: the started ones
// (in flight, their ack held to the end of their slot, or settled and
// waiting for their dedupe record) and the delayed ones (held until due,
// or handed back to wait in the stream) whose instant is after job's
// ready instant. The memory kind's Ahead counts neither. An instance that
// is not the drainer knows of none. Requires q.mu.
func (q *Queue) notAheadLocked(job *queue.Job, at time.Time) int {
	ready := at
	if job.NotBefore.After(ready) {
		ready = job.NotBefore
	}
	k := len(q.levelDepth)
	l := 0
	if k > 0 {
		l = queue.Level(job, k)
	}
	in := func(level int) bool { return k == 0 || level <= l }
	subj := func(m natsjs.Msg) bool { return k == 0 || in(levelOfSubject(q.subject, m.Subject(), k)) }
	n := 0
	for j := range q.taken {
		if k == 0 || in(queue.Level(j, k)) {
			n++
		}
	}
	for m := range q.held {
		if subj(m) {
			n++
		}
	}
	for m := range q.unrecorded {
		if subj(m) {
			n++
		}
	}
	for _, nj := range q.naked {
		if nj.at.After(ready) && (k == 0 || in(min(nj.level, k-1))) {
			n++
		}
	}
	if q.index.delayed > 0 {
		for j, h := range q.index.msgs {
			if h.notBefore.After(ready) && (k == 0 || in(queue.Level(j, k))) {
				n++
			}
		}
	}
	return n
}
