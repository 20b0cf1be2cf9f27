package shaper

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/shaperd/shaper/limiter"
	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/admission"
	"github.com/shaperd/shaper/shaper/batch"
	"github.com/shaperd/shaper/shaper/settings"
)

// sweepEvery is how often a lane lets its admission limiter reap idle keys
// (done inline by a submission, so no goroutine or timer is needed).
const sweepEvery = time.Minute

// retryUnavailable is the Retry-After of a store that failed (not for
// capacity): long enough for a NATS reconnect or leader election.
const retryUnavailable = time.Second

// SubmitFunc offers job to its lane at the current time and calls done
// exactly once with the receipt; it never holds up the caller on a lane
// lock held across I/O. Every submission takes one path, whatever the
// lane's queue kind and admission store (see lane.submit): done runs
// before SubmitFunc returns for an in-memory lane; for a lane whose
// admission decision does I/O (admission.Admitter.Blocks) the whole
// submission runs on a goroutine owned by the Shaper, and for a durable
// queue done runs from the store's goroutine once the store answered.
// SubmitFunc may block while a durable queue's window of unacknowledged
// stores is full.
//
// On acceptance the shaper owns job (do not modify it afterwards): it sets
// Enqueued, Deadline (from job.MaxWait, else the lane's MaxWait) and, when
// empty, ID (Deps.NewJobID's, or the queue's name for it: queue.Finder).
func (s *Shaper) SubmitFunc(job *queue.Job, done func(Receipt)) {
	now := time.Now()
	l := s.lookup(job)
	if l != nil && l.blocking.Load() {
		if !s.goRemote(func() { s.submitFunc(now, l, job, done) }) {
			done(s.rejectBusy(l, job))
		}
		return
	}
	s.submitFunc(now, l, job, done)
}

// submitFunc runs the path and calls done with the receipt, now or once
// the queue's store answered.
func (s *Shaper) submitFunc(now time.Time, l *lane, job *queue.Job, done func(Receipt)) {
	sub := s.submit(now, l, job)
	if !sub.pending {
		s.refund(sub.charged, sub.rc)
		done(sub.rc)
		return
	}
	l.await(now, job, sub, done)
}

// Submit is SubmitAt(time.Now(), job).
func (s *Shaper) Submit(job *queue.Job) Receipt { return s.SubmitAt(time.Now(), job) }

// SubmitAt runs SubmitFunc's path at now on the calling goroutine and
// returns the receipt. It blocks on I/O only where that path does: a
// remote admission decision, a durable store.
func (s *Shaper) SubmitAt(now time.Time, job *queue.Job) Receipt {
	l := s.lookup(job)
	sub := s.submit(now, l, job)
	if !sub.pending {
		s.refund(sub.charged, sub.rc)
		return sub.rc
	}
	ch := make(chan Receipt, 1)
	l.await(now, job, sub, func(rc Receipt) { ch <- rc })
	return <-ch
}

// lookup returns job's lane (nil: none); a job for no lane without an ID
// gets one (the lane gives the others theirs: l.giveID).
func (s *Shaper) lookup(job *queue.Job) *lane {
	s.mu.RLock()
	l := s.active[job.Downstream]
	s.mu.RUnlock()
	if l == nil && job.ID == "" {
		job.ID = s.newID()
	}
	return l
}

// submission is where a job's path left it: its receipt, final unless
// pending (then stored runs the queue's store, l.await), and what
// admission charged for it, given back if the job is refused after all.
type submission struct {
	rc      Receipt
	stored  queue.Stored
	pending bool
	charged admission.Charge
}

// submit answers a job for an unknown lane, or runs l's path.
func (s *Shaper) submit(now time.Time, l *lane, job *queue.Job) submission {
	rc := Receipt{JobID: job.ID, Downstream: job.Downstream}
	switch {
	case l != nil:
		return l.submit(now, job, rc)
	case s.closing.Load():
		s.met.Received(settings.Unknown)
		return submission{rc: s.reject(nil, rc, ReasonUnavailable, 0, errShuttingDown)}
	default:
		s.met.Received(settings.Unknown)
		return submission{rc: s.reject(nil, rc, ReasonUnknownDownstream, 0,
			s.unknownDownstream(job.Downstream))}
	}
}

// submit is the one admission path: the lane's checks, capacity,
// admission, then the queue. The checks run under l.mu in this order:
// shutting down → unavailable; removed → unknown_downstream; cost →
// bad_request; capacity → queue_full; the key's share → queue_full;
// predicted start → would_expire. Capacity comes before admission, so a
// job refused as queue_full is never charged to the limiter. A local
// admission decision is made under the same lock; one that does I/O is
// made with the lock released, and the checks run again once it is
// retaken (the queue may have filled meanwhile: the job is then refused
// and its key's charge given back). The queue then takes the job under the
// lock: a memory kind places it there and the receipt is final; a durable
// kind's Stored is returned pending, for await to run once the lock is
// released. A job refused after admission charged it (a repeated check,
// the queue's store full or failing) gets the charge back (Shaper.refund,
// run by the caller without the lock). Every receipt is counted (received,
// accepted, rejected{reason}).
func (l *lane) submit(now time.Time, job *queue.Job, rc Receipt) submission {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.giveID(job, &rc)
	l.c.received++
	l.m.Received.Inc()
	rc, ok := l.check(now, job, rc)
	var c admission.Charge
	if ok {
		var dec admission.Answer
		dec, rc, ok = l.decide(now, job, rc)
		c = dec.Charge()
		if ok {
			rc, ok = l.admitted(job, rc, dec)
		}
	}
	if !ok {
		return submission{rc: rc, charged: c}
	}
	sub := l.place(now, job, rc)
	sub.charged = c
	return sub
}

// place offers a job that passed the checks to the queue: a memory kind's
// answer is booked at once; a durable kind's Stored is returned pending,
// for await. Requires l.mu.
func (l *lane) place(now time.Time, job *queue.Job, rc Receipt) submission {
	stored := l.enqueue(now, job)
	if p, known, err := stored.Answer(); known {
		return submission{rc: l.stored(now, job, rc, p, err)}
	}
	return submission{rc: rc, stored: stored, pending: true}
}

// await runs a durable queue's Stored, without l.mu, and calls done with
// the booked receipt once the store answered, after giving back the
// job's charge if the store refused or failed it.
func (l *lane) await(now time.Time, job *queue.Job, sub submission, done func(Receipt)) {
	sub.stored.Then(func(p queue.Placed, err error) {
		l.mu.Lock()
		rc := l.stored(now, job, sub.rc, p, err)
		l.mu.Unlock()
		l.s.refund(sub.charged, rc)
		done(rc)
	})
}

// refund gives c back unless rc accepted the job. It runs without a
// lane's lock; a rule whose store does I/O refunds on a goroutine owned
// by the Shaper (goRemote), so neither the caller nor a durable queue's
// store waits for it; when none can start (shutting down, or
// maxRemoteDecisions in flight) the charge is kept.
func (s *Shaper) refund(c admission.Charge, rc Receipt) {
	switch {
	case c.IsZero() || rc.Accepted:
	case !c.Blocks():
		c.Refund()
	default:
		s.goRemote(c.Refund)
	}
}

// decide asks the lane's admission rule about job, with l.mu released for
// a decision that does I/O and the checks repeated once it is retaken; ok
// is false (and rc the rejection) when a repeated check refused.
// Requires l.mu.
func (l *lane) decide(now time.Time, job *queue.Job, rc Receipt) (admission.Answer, Receipt, bool) {
	adm := l.adm
	if adm != nil && now.Sub(l.swept) >= sweepEvery {
		l.swept = now
		adm.Sweep(now)
	}
	if adm == nil || !adm.Blocks() {
		return admission.Ask(adm, job.Key, now, queue.JobCost(job)), rc, true
	}
	l.mu.Unlock()
	dec := admission.Ask(adm, job.Key, now, queue.JobCost(job))
	l.mu.Lock()
	rc, ok := l.check(now, job, rc)
	return dec, rc, ok
}

// check runs the lane's checks before admission. Requires l.mu.
func (l *lane) check(now time.Time, job *queue.Job, rc Receipt) (Receipt, bool) {
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
	if b := l.cfg.Batch; b.On() {
		if err := batch.Encoding(b.Encoding).Check(job.Payload); err != nil {
			return l.s.reject(l, rc, ReasonBadRequest, 0, plainf(err, "downstream %s: %v", l.name, err)), false
		}
	}
	if rej, ok := l.checkSchedule(now, job, rc); !ok {
		return rej, false
	}
	if rej, ok := l.checkCapacity(now, job, rc); !ok {
		return rej, false
	}
	if rej, ok := l.checkBytes(now, job, rc); !ok {
		return rej, false
	}
	if rej, ok := l.checkKeyShare(now, job, rc); !ok {
		return rej, false
	}
	return l.checkDeadline(now, job, rc)
}

// admitted books the admission decision: rc unchanged when d admits job.
// Requires l.mu.
func (l *lane) admitted(job *queue.Job, rc Receipt, dec admission.Answer) (Receipt, bool) {
	d, err := dec.Decision, dec.Err
	switch {
	case errors.Is(err, admission.ErrUnavailable):
		return l.s.reject(l, rc, ReasonUnavailable, retryUnavailable, plainf(err, "the admission store of downstream %s did not answer, so the job was not taken; retry in %s", l.name, retryUnavailable)), false
	case errors.Is(err, limiter.ErrCostTooLarge):
		return l.s.reject(l, rc, ReasonBadRequest, 0, plainf(err, "job cost %d is more than downstream %s's admission limit can ever admit; send a lower Shaper-Cost", job.Cost, l.name)), false
	case err != nil:
		return l.s.reject(l, rc, ReasonBadRequest, 0, plainf(err, "job cost %d is not valid for downstream %s's admission limit; send a Shaper-Cost of 1 or more", job.Cost, l.name)), false
	case !d.Allowed:
		return l.s.reject(l, rc, ReasonRateLimited, d.RetryAfter,
			rateLimited(l.name, job.Key, d.RetryAfter)), false
	}
	return rc, true
}

// enqueue stamps an admitted job and offers it to the queue. A delayed
// job's max wait counts from its instant. Requires l.mu.
func (l *lane) enqueue(now time.Time, job *queue.Job) queue.Stored {
	l.stamp(now, job)
	stored := l.q.Offer(job, now)
	l.reschedule(now)
	return stored
}

// stamp sets what a job offered at now carries into its queue: its
// enqueue time, no tries yet, and its deadline. Requires l.mu.
func (l *lane) stamp(now time.Time, job *queue.Job) {
	job.Enqueued, job.Attempt, job.Failures = now, 0, 0
	if !job.NotBefore.After(now) {
		job.NotBefore = time.Time{} // an instant already past: no delay
	}
	job.Deadline = time.Time{}
	if wait := cmp0(job.MaxWait, l.cfg.MaxWait); wait > 0 {
		job.Deadline = later(now, job.NotBefore).Add(wait)
	}
}

// stored books the queue's answer for an admitted job. Requires l.mu.
func (l *lane) stored(now time.Time, job *queue.Job, rc Receipt, p queue.Placed, err error) Receipt {
	rc.JobID = job.ID // the queue's name for it; a duplicate's, the stored job's
	switch {
	case errors.Is(err, queue.ErrDuplicate):
		rc.Accepted, rc.Duplicate = true, true
		return rc
	case errors.Is(err, queue.ErrMaxBytes):
		return l.s.reject(l, rc, ReasonQueueFull, l.fullFreesIn(now),
			plainf(err, "queue %s is at its queue.max_bytes of %d bytes, so a job of %d bytes does not fit; retry later or raise queue.max_bytes", l.name, l.cfg.MaxBytes, len(job.Payload)))
	case errors.Is(err, queue.ErrNoSpace):
		return l.outOfSpace(now, rc, err)
	case errors.Is(err, queue.ErrKeyFull):
		return l.s.reject(l, rc, ReasonQueueFull, l.fullFreesIn(now),
			plainf(err, "key %q holds its queue.key_capacity of %d in queue %s; retry later", job.Key, l.cfg.KeyCapacity, l.name))
	case errors.Is(err, queue.ErrFull):
		return l.s.reject(l, rc, ReasonQueueFull, l.fullFreesIn(now),
			plainf(err, "queue %s is full (%d/%d); retry later or raise queue.capacity", l.name, l.q.Cap(), l.q.Cap()))
	case err != nil:
		return l.s.reject(l, rc, ReasonUnavailable, retryUnavailable,
			plainf(err, "queue %s could not store the job, so it was not taken; retry in %s", l.name, retryUnavailable))
	}
	l.spaceAgain()
	l.c.accepted++
	l.m.Accepted.Inc()
	l.noteAccepted(job, now)
	rc.Accepted, rc.Position = true, max(p.Position, 1)
	rc.NotBefore = job.NotBefore
	if start, ok := l.predictStart(now, p.Ahead); ok {
		rc.ETA = later(start, job.NotBefore).Sub(now)
	} else { // no start is scheduled: no ETA to give
		rc.Paused = true
	}
	return rc
}

// reject fills and counts a rejected receipt; l is nil for unknown lanes.
func (s *Shaper) reject(l *lane, rc Receipt, r Reason, retryAfter time.Duration, err error) Receipt {
	rc.Accepted, rc.Reason, rc.RetryAfter, rc.Err = false, r, retryAfter, err
	if l == nil {
		s.met.Rejected(settings.Unknown, string(r))
		return rc
	}
	l.c.rejected[r]++
	l.m.Rejected[string(r)].Inc()
	return rc
}

// giveID gives job an ID when it has none, unless the lane's queue names
// the jobs it stores (then the ID comes with the store's answer, l.stored).
// Requires l.mu.
func (l *lane) giveID(job *queue.Job, rc *Receipt) {
	if job.ID == "" && l.q.Finder == nil {
		job.ID = l.s.newID()
		rc.JobID = job.ID
	}
}

// newJobID returns 128 random bits in hex.
func newJobID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}
