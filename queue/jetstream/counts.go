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
			q.dropNakedLocked(seq)
			continue
		}
		delayedBy[min(nj.level, k-1)]++
		delayed++
	}
	for job, at := range q.index.soon {
		if at.After(now) {
			delayedBy[queue.Level(job, k)]++
			delayed++
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
// waiting for their dedupe record), the delayed ones it holds whose
// instant is after job's, and, for a job with no instant of its own, those
// handed back to wait in the stream (all due later; for a delayed job they
// stay counted, an upper bound, as ordering them per job would cost a scan
// of them on every store). It costs the started and held delayed jobs
// (a lane's concurrency and the next two seconds' delayed jobs), not the
// stream's. The memory kind's Ahead counts none of them. An instance that
// is not the drainer knows of none. Requires q.mu.
func (q *Queue) notAheadLocked(job *queue.Job, at time.Time) int {
	k := len(q.levelDepth)
	if k == 0 {
		n := len(q.taken) + len(q.held) + len(q.unrecorded) + q.index.soonAfter(later(at, job.NotBefore), nil)
		if !job.NotBefore.After(at) {
			n += len(q.naked)
		}
		return n
	}
	l := queue.Level(job, k)
	in := func(level int) bool { return min(level, k-1) <= l }
	inSubject := func(m natsjs.Msg) bool { return in(levelOfSubject(q.subject, m.Subject(), k)) }
	n := q.index.soonAfter(later(at, job.NotBefore), func(j *queue.Job) bool { return in(queue.Level(j, k)) })
	for j := range q.taken {
		if in(queue.Level(j, k)) {
			n++
		}
	}
	for m := range q.held {
		if inSubject(m) {
			n++
		}
	}
	for m := range q.unrecorded {
		if inSubject(m) {
			n++
		}
	}
	if !job.NotBefore.After(at) {
		for lv, c := range q.nakedBy {
			if in(lv) {
				n += c
			}
		}
	}
	return n
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// addNakedLocked books a job handed back to wait out its delay, and
// dropNakedLocked forgets one (fetched again, or due by now), keeping
// the count by level that notAheadLocked reads. Require q.mu.
func (q *Queue) addNakedLocked(seq uint64, nj nakedJob) {
	q.dropNakedLocked(seq)
	q.naked[seq] = nj
	for len(q.nakedBy) <= nj.level {
		q.nakedBy = append(q.nakedBy, 0)
	}
	q.nakedBy[nj.level]++
}

func (q *Queue) dropNakedLocked(seq uint64) {
	if nj, ok := q.naked[seq]; ok {
		delete(q.naked, seq)
		q.nakedBy[nj.level]--
	}
}
