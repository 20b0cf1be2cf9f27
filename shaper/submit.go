package shaper

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/shaperd/shaper/limiter"
	"github.com/shaperd/shaper/queue"
)

// sweepEvery is how often a lane lets its admission limiter reap idle keys
// (done inline by a Submit, so no goroutine or timer is needed).
const sweepEvery = time.Minute

// Submit is SubmitAt(time.Now(), job).
func (s *Shaper) Submit(job *Job) Receipt { return s.SubmitAt(s.clock(), job) }

// SubmitAt offers job to its lane at now and says what happened; it never
// blocks on I/O and is safe for concurrent use. On acceptance the shaper
// owns job (do not modify it afterwards): it sets Enqueued, Deadline (from
// job.MaxWait, else the lane's MaxWait) and, when empty, ID (128 random
// bits, hex).
//
// The checks run in this order, under the lane's lock: shutting down →
// unavailable; no such lane → unknown_downstream; queue full → queue_full;
// admission → rate_limited. Capacity is checked before admission so that a
// job refused as queue_full is never charged to the limiter (no refund is
// needed). Every receipt is counted (received, accepted, rejected{reason}).
func (s *Shaper) SubmitAt(now time.Time, job *Job) Receipt {
	if job.ID == "" {
		job.ID = newJobID()
	}
	rc := Receipt{JobID: job.ID, Downstream: job.Downstream}
	s.mu.RLock()
	l := s.active[job.Downstream]
	s.mu.RUnlock()
	if l == nil {
		s.met.Received(unknownLabel)
		if s.closing.Load() {
			return s.reject(nil, rc, ReasonUnavailable, 0, errShuttingDown)
		}
		return s.reject(nil, rc, ReasonUnknownDownstream, 0,
			fmt.Errorf("no downstream named %q", job.Downstream))
	}
	return l.submitLocked(now, job, rc)
}

var errShuttingDown = errors.New("shaper is shutting down")

// submit is SubmitAt for lane l. Requires l.mu.
func (l *lane) submit(now time.Time, job *Job, rc Receipt) Receipt {
	l.c.received++
	l.m.received.Inc()
	switch {
	case l.s.closing.Load():
		return l.s.reject(l, rc, ReasonUnavailable, 0, errShuttingDown)
	case l.removed:
		return l.s.reject(l, rc, ReasonUnknownDownstream, 0,
			fmt.Errorf("downstream %q was removed from the config", l.name))
	}
	if rej, ok := l.checkCost(job, rc); !ok {
		return rej
	}
	c := jobCost(job)
	if l.level(now)+c > l.q.Cap() {
		l.dropExpiredFront(now)
	}
	if n := l.level(now); n+c > l.q.Cap() {
		return l.s.reject(l, rc, ReasonQueueFull, l.levelFreesIn(now, n+c-l.q.Cap()),
			fmt.Errorf("queue %s is full (%d/%d)", l.name, n, l.q.Cap()))
	}
	if rej, ok := l.checkKeyShare(now, job, rc); !ok {
		return rej
	}
	if rej, ok := l.checkDeadline(now, job, rc); !ok {
		return rej
	}
	if rej, ok := l.admit(now, job, rc); !ok {
		return rej
	}
	job.Enqueued, job.Attempt, job.Failures = now, 0, 0
	job.Deadline = time.Time{}
	if wait := cmp0(job.MaxWait, l.cfg.MaxWait); wait > 0 {
		job.Deadline = now.Add(wait)
	}
	ahead := l.aheadOf(job)
	if err := l.q.Enqueue(job, now); err != nil { // cannot happen: checked above, same lock
		return l.s.reject(l, rc, ReasonQueueFull, l.slotFreesIn(now), err)
	}
	l.c.accepted++
	l.m.accepted.Inc()
	l.m.depth.Set(float64(l.q.Len()))
	l.reschedule()
	rc.Accepted, rc.Position = true, l.q.Len()
	rc.ETA = l.predictStart(now, ahead).Sub(now)
	return rc
}

// admit runs the lane's admission limiter, if any, for job.Key.
// Requires l.mu.
func (l *lane) admit(now time.Time, job *Job, rc Receipt) (Receipt, bool) {
	if l.adm == nil {
		return rc, true
	}
	if now.Sub(l.swept) >= sweepEvery {
		l.swept = now
		l.adm.Sweep(now)
	}
	d, err := l.adm.AllowAt(job.Key, now, max(job.Cost, 1))
	switch {
	case errors.Is(err, ErrAdmissionUnavailable):
		return l.s.reject(l, rc, ReasonUnavailable, retryUnavailable, err), false
	case errors.Is(err, limiter.ErrCostTooLarge):
		return l.s.reject(l, rc, ReasonBadRequest, 0, fmt.Errorf("job cost %d can never be admitted: %w", job.Cost, err)), false
	case err != nil:
		return l.s.reject(l, rc, ReasonBadRequest, 0, err), false
	case !d.Allowed:
		return l.s.reject(l, rc, ReasonRateLimited, d.RetryAfter,
			fmt.Errorf("rate limited: retry in %s", d.RetryAfter)), false
	}
	return rc, true
}

// level is how full the bucket is at now: the queued jobs plus the job
// started in the current drain interval, which is still "leaking out" until
// one interval after its slot. Counting it makes a burst shorter than one
// interval into an idle lane accept exactly Capacity jobs however the
// scheduler interleaves with the submissions, and makes the slot free at
// the moment Retry-After names. Costs count: a job of cost N holds N slots
// while queued and, once started, the slots of its N intervals not yet
// drained. Requires l.mu.
func (l *lane) level(now time.Time) int {
	n := queuedCost(l.q)
	if !l.last.IsZero() {
		if left := l.last.Add(l.drainOf(l.lastCost)).Sub(now); left > 0 {
			n += int((left + l.interval - 1) / l.interval)
		}
	}
	return n
}

// slotFreesIn is the Retry-After for a full queue: the time until the lane's
// next start frees a slot (after any pushback pause). When that start is
// already due the slot goes to whoever comes first, so the answer is one
// interval. While the lane is paused by the admin API no start is scheduled
// and the answer is 0 (unknown). Requires l.mu.
func (l *lane) slotFreesIn(now time.Time) time.Duration {
	if l.paused {
		return 0
	}
	if d := later(l.next, l.pushback).Sub(now); d > 0 {
		return d
	}
	return l.interval
}

// levelFreesIn is the Retry-After for a job that finds the bucket need
// slots short: the time until level (queued cost plus what the last start
// still holds) has dropped by need. The last start frees its slots one per
// interval as its drain time elapses; after it, the level only drops again
// from the next start (not before the lane's next slot or a pushback's end).
// 0 while the lane is paused by the admin API (no start is scheduled).
// Requires l.mu.
func (l *lane) levelFreesIn(now time.Time, need int) time.Duration {
	if l.paused {
		return 0
	}
	need = max(need, 1)
	held, first := 0, time.Duration(0)
	if !l.last.IsZero() {
		if r := l.last.Add(l.drainOf(l.lastCost)).Sub(now); r > 0 {
			held = int((r + l.interval - 1) / l.interval)
			first = r - time.Duration(held-1)*l.interval
		}
	}
	if need <= held {
		return first + time.Duration(need-1)*l.interval
	}
	next := later(later(l.next, l.pushback), now)
	if held > 0 {
		next = later(next, now.Add(first+time.Duration(held-1)*l.interval))
	}
	return next.Sub(now) + time.Duration(need-held)*l.interval
}

// freesIn is the Retry-After for the need-th start from now: slotFreesIn,
// plus an interval for each further start (a fair-queuing key's share frees
// when its own jobs start). Requires l.mu.
func (l *lane) freesIn(now time.Time, need int) time.Duration {
	d := l.slotFreesIn(now)
	if d == 0 {
		return 0
	}
	return d + l.drainOf(need) - l.interval
}

// dropExpiredFront drops expired jobs at the front of a full queue so they
// do not hold capacity until a start reaches them. With the lane's MaxWait
// alone, deadlines follow queue order, so this finds every expired job.
// Requires l.mu.
func (l *lane) dropExpiredFront(now time.Time) {
	expired := l.q.DropFront(func(j *Job) bool {
		return !j.Deadline.IsZero() && now.After(j.Deadline)
	})
	for _, j := range expired {
		l.drop(j, ReasonExpired, "not started within max wait")
	}
}

// reject fills and counts a rejected receipt; l is nil for unknown lanes.
func (s *Shaper) reject(l *lane, rc Receipt, r Reason, retryAfter time.Duration, err error) Receipt {
	rc.Accepted, rc.Reason, rc.RetryAfter, rc.Err = false, r, retryAfter, err
	if l == nil {
		s.met.Rejected(unknownLabel, r)
		return rc
	}
	l.c.rejected[r]++
	l.m.rejected[r].Inc()
	return rc
}

// newJobID returns 128 random bits in hex.
func newJobID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

// SubmitFunc offers job to its lane at the current time and calls done
// exactly once with the receipt. For an in-memory lane it is SubmitAt, and
// done runs before SubmitFunc returns — unless the lane's admission state
// is remote (Deps.Admitters): then the whole submission runs on a goroutine
// owned by the Shaper and done runs from it, so a store round trip never
// holds up the caller. For a lane with a DurableQueue the
// checks run under the lane's lock (unavailable, unknown_downstream,
// admission), then the job is stored outside every lock and done runs from
// the store's goroutine once the store answered: accepted only after the
// job is stored; queue_full when the store refused for capacity (the bound
// is the store's, shared by every instance). Admission runs before the
// store, so on a durable lane a queue_full rejection has cost the key its
// admission (a stored job cannot be taken back).
//
// SubmitFunc may block while the durable queue's window of unacknowledged
// stores is full; it never blocks on a lane lock held across I/O.
func (s *Shaper) SubmitFunc(job *Job, done func(Receipt)) {
	now := s.clock()
	s.mu.RLock()
	l := s.active[job.Downstream]
	s.mu.RUnlock()
	if job.ID == "" {
		job.ID = newJobID()
	}
	if l != nil && l.remoteAdmission() {
		if !s.goRemote(func() { s.submitFunc(now, l, job, done) }) {
			done(s.rejectBusy(l, job))
		}
		return
	}
	s.submitFunc(now, l, job, done)
}

// submitFunc is SubmitFunc once the lane is known; for a lane with remote
// admission it runs on a goroutine of goRemote's.
func (s *Shaper) submitFunc(now time.Time, l *lane, job *Job, done func(Receipt)) {
	var dq DurableQueue
	if l != nil {
		dq, _ = l.q.(DurableQueue)
	}
	if dq == nil {
		done(s.SubmitAt(now, job))
		return
	}
	if job.ID == "" {
		job.ID = newJobID()
	}
	rc := Receipt{JobID: job.ID, Downstream: job.Downstream}
	rc, ok := l.admitDurableLocked(now, job, rc)
	if !ok {
		done(rc)
		return
	}
	dq.EnqueueAsync(job, func(pos int, err error) {
		rc.JobID = job.ID // a duplicate carries the stored job's id
		l.mu.Lock()
		rc := l.stored(s.clock(), rc, pos, err)
		l.mu.Unlock()
		done(rc)
	})
}

// admitDurable is the part of submit that runs before a durable store: the
// lane's state and admission. Requires l.mu.
func (l *lane) admitDurable(now time.Time, job *Job, rc Receipt) (Receipt, bool) {
	l.c.received++
	l.m.received.Inc()
	switch {
	case l.s.closing.Load():
		return l.s.reject(l, rc, ReasonUnavailable, 0, errShuttingDown), false
	case l.removed:
		return l.s.reject(l, rc, ReasonUnknownDownstream, 0,
			fmt.Errorf("downstream %q was removed from the config", l.name)), false
	}
	if rej, ok := l.checkCost(job, rc); !ok {
		return rej, false
	}
	if rej, ok := l.checkDeadline(now, job, rc); !ok {
		return rej, false
	}
	if rej, ok := l.admit(now, job, rc); !ok {
		return rej, false
	}
	job.Enqueued, job.Attempt, job.Failures = now, 0, 0
	job.Deadline = time.Time{}
	if wait := cmp0(job.MaxWait, l.cfg.MaxWait); wait > 0 {
		job.Deadline = now.Add(wait)
	}
	return rc, true
}

// ErrDuplicate is reported by a DurableQueue's EnqueueAsync when the store
// already holds a job with the same Job.DedupeID; the queue sets job.ID to
// that job's id.
var ErrDuplicate = errors.New("shaper: duplicate job")

// retryUnavailable is the Retry-After of a store that failed (not for
// capacity): long enough for a NATS reconnect or leader election.
const retryUnavailable = time.Second

// stored books the store's answer for a durable submission. Requires l.mu.
func (l *lane) stored(now time.Time, rc Receipt, pos int, err error) Receipt {
	switch {
	case errors.Is(err, ErrDuplicate):
		rc.Accepted, rc.Duplicate = true, true
		return rc
	case errors.Is(err, queue.ErrFull):
		return l.s.reject(l, rc, ReasonQueueFull, l.slotFreesIn(now),
			fmt.Errorf("queue %s is full (%d/%d): %w", l.name, l.q.Cap(), l.q.Cap(), err))
	case err != nil:
		return l.s.reject(l, rc, ReasonUnavailable, retryUnavailable,
			fmt.Errorf("queue %s: job not stored: %w", l.name, err))
	}
	l.c.accepted++
	l.m.accepted.Inc()
	l.m.depth.Set(float64(l.q.Len()))
	rc.Accepted, rc.Position = true, max(pos, 1)
	start := later(later(l.next, l.pushback), now).Add(time.Duration(rc.Position-1) * l.interval)
	rc.ETA = start.Sub(now)
	return rc
}
