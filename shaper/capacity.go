package shaper

import (
	"fmt"
	"time"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/predict"
)

// checkCapacity refuses a job whose cost does not fit the bucket's level,
// as queue_full, after dropping expired jobs that hold capacity at the
// front. A durable queue's store enforces its bound itself (it plays no
// queue.Memory role): there the store refuses, after admission.
// Requires l.mu.
func (l *lane) checkCapacity(now time.Time, job *queue.Job, rc Receipt) (Receipt, bool) {
	mem := l.q.Memory
	if mem == nil {
		return rc, true
	}
	c := queue.JobCost(job)
	if mem.Fits(l.leaking(now) + c) {
		return rc, true
	}
	l.dropExpiredFront(now)
	if mem.Fits(l.leaking(now) + c) {
		return rc, true
	}
	n := l.level(now)
	return l.s.reject(l, rc, ReasonQueueFull, l.levelFreesIn(now, n+c-l.q.Cap()),
		fmt.Errorf("queue %s is full (%d/%d); retry later or raise queue.capacity", l.name, n, l.q.Cap())), false
}

// checkBytes refuses a job whose payload does not fit the queue's byte
// bound (queue.max_bytes), as queue_full, after dropping expired jobs at
// the front; Retry-After is when the next start frees the front job's
// bytes. A durable queue's store enforces the bound itself. Requires l.mu.
func (l *lane) checkBytes(now time.Time, job *queue.Job, rc Receipt) (Receipt, bool) {
	mem, n := l.q.Memory, len(job.Payload)
	if mem == nil || mem.FitsBytes(n) {
		return rc, true
	}
	l.dropExpiredFront(now)
	if mem.FitsBytes(n) {
		return rc, true
	}
	return l.s.reject(l, rc, ReasonQueueFull, l.slotFreesIn(now),
		fmt.Errorf("queue %s holds %d of its queue.max_bytes of %d bytes, so a job of %d bytes does not fit; retry later or raise queue.max_bytes",
			l.name, mem.Bytes(), l.cfg.MaxBytes, n)), false
}

// checkKeyShare refuses a job whose key already holds its share of the
// queue (KeyCapacity) under fairness, as queue_full. Retry-After is when
// enough of the key's jobs will have started to make room, at the lane's
// rate, with the other keys served in turn. Requires l.mu.
func (l *lane) checkKeyShare(now time.Time, job *queue.Job, rc Receipt) (Receipt, bool) {
	if l.q.Shares == nil {
		return rc, true
	}
	sh := l.q.Shares.Share(job)
	if !sh.Over(queue.JobCost(job)) || l.shadowed(ReasonQueueFull) {
		return rc, true
	}
	return l.s.reject(l, rc, ReasonQueueFull, l.freesIn(now, sh.Ahead+1),
		fmt.Errorf("key %q holds its share of queue %s (%d/%d); retry later", job.Key, l.name, sh.Held, sh.Limit)), false
}

// level is how full the bucket is at now: the queued jobs plus the job
// started in the current drain interval, which is still "leaking out" until
// one interval after its slot. Counting it makes a burst shorter than one
// interval into an idle lane accept exactly Capacity jobs however the
// scheduler interleaves with the submissions, and makes the slot free at
// the moment Retry-After names. Costs count: a job of cost N holds N slots
// while queued and, once started, the slots of its N intervals not yet
// drained. Requires l.mu.
func (l *lane) level(now time.Time) int { return l.q.Cost() + l.leaking(now) }

// leaking is the part of level the last start still holds: the slots of
// its drain intervals not yet over at now. Requires l.mu.
func (l *lane) leaking(now time.Time) int {
	n, _ := l.sched.Held(now)
	return n
}

// slotFreesIn is the Retry-After for a full queue: the time until the lane's
// next start frees a slot (predict.SlotFreesIn; no earlier than its
// policies allow: after a pushback pause or an open breaker; nor before the
// first held job is ready: delayed jobs start no earlier than their
// instants). While the lane is paused by the admin API until resumed no
// start is scheduled and the answer is 0 (unknown). Requires l.mu.
func (l *lane) slotFreesIn(now time.Time) time.Duration {
	if !l.scheduled(now) {
		return 0
	}
	next := l.nextFreeAt(now)
	return predict.SlotFreesIn(now, next, l.sched.Interval())
}

// levelFreesIn is the Retry-After for a job that finds the bucket need
// slots short: the time until level (queued cost plus what the last start
// still holds) has dropped by need (predict.LevelFreesIn; the next start
// is not before the lane's next slot, a pushback's end, or the first held
// job's ready instant: nextFreeAt). 0 while the lane is paused by the
// admin API until resumed (no start is scheduled). Requires l.mu.
func (l *lane) levelFreesIn(now time.Time, need int) time.Duration {
	if !l.scheduled(now) {
		return 0
	}
	held, first := l.sched.Held(now)
	return predict.LevelFreesIn(now, need, held, first, l.sched.Interval(),
		func() time.Time { return l.nextFreeAt(now) })
}

// freesIn is the Retry-After for the need-th start from now: slotFreesIn,
// plus an interval for each further start (a fair-queuing key's share frees
// when its own jobs start). Requires l.mu.
func (l *lane) freesIn(now time.Time, need int) time.Duration {
	slot := l.slotFreesIn(now)
	return predict.StartFreesIn(slot, need, l.sched.Interval())
}

// dropExpiredFront drops expired jobs at the front of a full queue so they
// do not hold capacity until a start reaches them, and returns how many.
// With the lane's MaxWait alone, deadlines follow queue order, so this
// finds every expired job of a memory queue; a durable queue's are the
// ones its drainer fetched (the oldest), and it fetches the next ones
// as these are deleted. Requires l.mu.
func (l *lane) dropExpiredFront(now time.Time) int {
	expired := func(j *queue.Job) bool { return !j.Deadline.IsZero() && now.After(j.Deadline) }
	var jobs []*queue.Job
	switch {
	case l.q.Memory != nil:
		jobs = l.q.Memory.DropFront(expired)
	case l.q.Settler != nil:
		jobs = l.q.Settler.DropFront(expired) // each settled once its dead letter is out
	}
	for _, j := range jobs {
		l.drop(j, ReasonExpired, "not started within max wait")
	}
	return len(jobs)
}

// fullFreesIn is the Retry-After for a job a durable queue's store refused
// as full: a second when expired jobs were just dropped to make room (the
// store has it once their dead letters are out), else slotFreesIn.
// Requires l.mu.
func (l *lane) fullFreesIn(now time.Time) time.Duration {
	if l.q.Memory == nil && l.dropExpiredFront(now) > 0 {
		return retryExpiredDropped
	}
	return l.slotFreesIn(now)
}

// retryExpiredDropped is fullFreesIn's answer after a drop of expired jobs.
const retryExpiredDropped = time.Second
