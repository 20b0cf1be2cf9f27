package jetstream

import (
	"math"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/queue"
)

// localKind is a memory kind as the local index uses it.
type localKind interface {
	queue.Queue
	queue.Picker
	DropFront(drop func(*queue.Job) bool) []*queue.Job
}

// index is the local index of a queue's fetched jobs not started yet: the
// memory kind the queue's settings name (queue.Bucket, or queue.Fair under
// fairness, with the same levels and weights), which orders their starts
// exactly as the memory backend does (levels; within a level retries,
// then fairness between keys, FIFO within a key; a delayed job waits in
// its delayed set until due), and each job's message. The stream bounds
// the jobs, so the kind's own bounds are off. Requires the queue's mutex.
type index struct {
	kind   localKind
	msgs   map[*queue.Job]natsjs.Msg
	levels int
	soon   map[*queue.Job]time.Time // held jobs that came with an instant (some may be due by now)
}

// localCapacity is the local kind's bound: none (the stream bounds).
const localCapacity = math.MaxInt32

func (x *index) init(fair bool) {
	s := queue.Settings{Capacity: localCapacity}
	if fair {
		x.kind = queue.NewFair(s)
	} else {
		x.kind = queue.NewBucket(s)
	}
	x.msgs, x.soon, x.levels = map[*queue.Job]natsjs.Msg{}, map[*queue.Job]time.Time{}, 1
}

// configure applies the levels and weights of s (the kind moves held
// jobs to their new levels).
func (x *index) configure(s queue.Settings) {
	x.levels = max(s.Priorities, 1)
	x.kind.Configure(queue.Settings{Capacity: localCapacity, Priorities: x.levels, Weights: s.Weights})
}

// len is the number of held jobs.
func (x *index) len() int { return len(x.msgs) }

// add holds a fetched job, offered at now: a job tried before (its
// failures, redelivered after its backoff) as a retry of its level, ahead
// of the level's fresh jobs, unless it is delayed still.
func (x *index) add(job *queue.Job, m natsjs.Msg, now time.Time) {
	x.msgs[job] = m
	if !job.NotBefore.IsZero() {
		x.soon[job] = job.NotBefore
	}
	if job.Failures > 0 && !job.NotBefore.After(now) {
		x.kind.RetryLater(job, now, false)
		return
	}
	_, _, _ = x.kind.Offer(job, now).Answer() // the kind is unbounded: never refused
}

// retry holds a taken job again as a retry of its level, ready at at (a
// pushback).
func (x *index) retry(job *queue.Job, m natsjs.Msg, at time.Time) {
	x.msgs[job] = m
	x.kind.RetryLater(job, at, true)
}

// take removes the job to start at now whose key may start (nil: any) and
// returns its message.
func (x *index) take(now time.Time, may func(string) bool) (*queue.Job, time.Time, natsjs.Msg, bool) {
	job, at, ok := x.kind.TakeIf(now, may)
	if !ok {
		return nil, time.Time{}, nil, false
	}
	m := x.msgs[job]
	delete(x.msgs, job)
	delete(x.soon, job)
	return job, at, m, true
}

// dropFront removes the jobs at the front while drop returns true
// (the kind's DropFront) and returns them with their messages.
func (x *index) dropFront(drop func(*queue.Job) bool) ([]*queue.Job, []natsjs.Msg) {
	jobs := x.kind.DropFront(drop)
	if len(jobs) == 0 {
		return nil, nil
	}
	msgs := make([]natsjs.Msg, len(jobs))
	for i, job := range jobs {
		msgs[i] = x.msgs[job]
		delete(x.msgs, job)
		delete(x.soon, job)
	}
	return jobs, msgs
}

// delayedAt is the number of held jobs whose instant is after now.
func (x *index) delayedAt(now time.Time) int { return x.soonAfter(now, nil) }

// soonAfter is the number of held jobs whose instant is after t, of those
// of which (nil: all).
func (x *index) soonAfter(t time.Time, of func(*queue.Job) bool) int {
	n := 0
	for job, at := range x.soon {
		if at.After(t) && (of == nil || of(job)) {
			n++
		}
	}
	return n
}

// release empties the index and returns the held messages.
func (x *index) release() []natsjs.Msg {
	out := make([]natsjs.Msg, 0, len(x.msgs))
	for _, m := range x.msgs {
		out = append(out, m)
	}
	x.kind.Release()
	clear(x.msgs)
	clear(x.soon)
	return out
}

// NextReady returns when the next held job may start.
func (q *Queue) NextReady() (time.Time, bool) { return q.NextReadyIf(nil) }

// NextReadyIf is NextReady over the held jobs whose key may start
// (queue.Picker): the local kind's. Jobs of keys that may not stay where
// they are, kept alive with the rest; while the index holds only such
// jobs, the lane waits.
func (q *Queue) NextReadyIf(may func(key string) bool) (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.hold.unrecorded) >= q.leaving { // the next to leave wakes the lane
		return time.Time{}, false
	}
	if q.stallLocked(time.Now()) { // the refresh that lifts the fence wakes the lane
		return time.Time{}, false
	}
	return q.hold.index.kind.NextReadyIf(may)
}

// Take hands out the next job, in the local kind's order.
func (q *Queue) Take(now time.Time) (*queue.Job, time.Time, bool) { return q.TakeIf(now, nil) }

// TakeIf is Take of the first held job, in Take's order, whose key may
// start (queue.Picker); the jobs passed over keep their places.
func (q *Queue) TakeIf(now time.Time, may func(key string) bool) (*queue.Job, time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.hold.unrecorded) >= q.leaving || q.stallLocked(time.Now()) {
		return nil, time.Time{}, false
	}
	job, at, m, ok := q.hold.index.take(now, may)
	if !ok {
		return nil, time.Time{}, false
	}
	q.hold.taken[job] = m
	q.signal()
	return job, at, true
}
