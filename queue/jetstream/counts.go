package jetstream

import (
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/queue"
)

// counts are what the queue knows of its stream's jobs (counts.go,
// depth.go): the depth, by level, and the delayed jobs. Requires the
// queue's mutex.
type counts struct {
	depth   depthBook   // stream's messages (refreshed; adjusted locally)
	levels  []depthBook // per level, most urgent first (levels > 1)
	delayed []int       // jobs waiting for their instant, by level: their tokens in the window (refresh)
	scratch []int       // Counts' scratch space
}

// Levels is the number of priority levels (queue.Counter).
func (q *Queue) Levels() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.hold.index.levels
}

// Counts fills levels with the jobs of each level not delayed and returns
// the delayed jobs whose instant is after now (queue.Counter). Both come
// from the streams, the same for every instance: each level's subjects'
// counts in the queue's stream, and the delayed jobs' tokens by level in
// the window (refreshed every 500 ms, the levels adjusted for this
// instance's stores and acks; jobs in flight included until they leave),
// with the drainer's delayed jobs held until due. It does not allocate
// once its scratch space has grown to the levels.
func (q *Queue) Counts(now time.Time, levels []int) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := q.hold.index.levels
	n := min(len(levels), k)
	if cap(q.cnt.scratch) < k {
		q.cnt.scratch = make([]int, k)
	}
	delayedBy := q.cnt.scratch[:k]
	clear(delayedBy)
	delayed := 0
	for l, c := range q.cnt.delayed {
		delayedBy[min(l, k-1)] += c
		delayed += c
	}
	for job, at := range q.hold.index.soon {
		if at.After(now) {
			delayedBy[queue.Level(job, k)]++
			delayed++
		}
	}
	if len(q.cnt.levels) == k {
		for l := range n {
			levels[l] = max(q.cnt.levels[l].n-delayedBy[l], 0)
		}
		return delayed
	}
	if n == k { // one level
		levels[0] = max(q.cnt.depth.n-delayed, 0)
	}
	return delayed
}

// notAheadLocked is the jobs the counts of Ahead hold (the stream's, or
// with levels those of job's level and the more urgent ones) that do not
// start before job, offered at at, as the drainer knows: the started ones
// (in flight, their ack held to the end of their slot, or settled and
// waiting for their dedupe record), the delayed ones it holds whose
// instant is after job's, and, for a job with no instant of its own, the
// jobs waiting for theirs (their tokens in the window, counted by every
// instance; for a delayed job they stay counted, an upper bound, as
// ordering them per job would cost a read of them on every store). It
// costs the started and held delayed jobs (a lane's concurrency and the
// next two seconds' delayed jobs), not the stream's. The memory kind's
// Ahead counts none of them. An instance that is not the drainer knows of
// no started job. Requires q.mu.
func (q *Queue) notAheadLocked(job *queue.Job, at time.Time) int {
	k := len(q.cnt.levels)
	if k == 0 {
		n := len(q.hold.taken) + q.hold.acks.len() + len(q.hold.unrecorded) + q.hold.index.soonAfter(later(at, job.NotBefore), nil)
		if !job.NotBefore.After(at) {
			for _, c := range q.cnt.delayed {
				n += c
			}
		}
		return n
	}
	l := queue.Level(job, k)
	in := func(level int) bool { return min(level, k-1) <= l }
	inSubject := func(m natsjs.Msg) bool { return in(levelOfSubject(q.subject, m.Subject(), k)) }
	n := q.hold.index.soonAfter(later(at, job.NotBefore), func(j *queue.Job) bool { return in(queue.Level(j, k)) })
	for j := range q.hold.taken {
		if in(queue.Level(j, k)) {
			n++
		}
	}
	for m := range q.hold.acks.at {
		if inSubject(m) {
			n++
		}
	}
	for m := range q.hold.unrecorded {
		if inSubject(m) {
			n++
		}
	}
	if !job.NotBefore.After(at) {
		for lv, c := range q.cnt.delayed {
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
