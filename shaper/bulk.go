package shaper

import (
	"fmt"
	"time"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/admission"
)

// SubmitEach offers jobs, in order, each as SubmitFunc offers one (its own
// checks, admission, capacity and receipt), and calls done once per job
// with its index and receipt, from any goroutine and in any order. One
// job's rejection does not stop the next. The jobs reach their queue in
// order: those of a lane whose admission decisions do I/O are submitted
// one after the other on one goroutine owned by the Shaper; on a durable
// queue their stores are pipelined, none waits for the one before.
func (s *Shaper) SubmitEach(jobs []*queue.Job, done func(i int, rc Receipt)) {
	if len(jobs) == 0 {
		return
	}
	l := s.lookup(jobs[0])
	if l == nil || !l.blocking.Load() {
		for i, job := range jobs {
			s.SubmitFunc(job, func(rc Receipt) { done(i, rc) })
		}
		return
	}
	run := func() {
		for i, job := range jobs {
			s.submitFunc(time.Now(), l, job, func(rc Receipt) { done(i, rc) })
		}
	}
	if !s.goRemote(run) {
		for i, job := range jobs {
			done(i, s.rejectBusy(l, job))
		}
	}
}

// SubmitAll offers jobs, all for one downstream, all or none, and calls
// done once with one receipt per job, in order. Either every job is
// queued, or none is and no admission charge is kept: each job passes the
// lane's checks and its admission as if offered alone, in order, each
// seeing the ones before it queued; when one is refused, the ones placed
// are withdrawn (a memory queue) or never stored (a durable queue stores
// them as one atomic batch: queue.Atomic), every charge is given back, and
// every job is refused with the failing job's reason and Retry-After, its
// own receipt saying why and the others' naming it. A job whose dedupe id
// a durable queue holds already is no failure: it is answered as a
// duplicate and the rest are queued.
//
// done runs before SubmitAll returns for a memory queue with a local
// admission rule; otherwise from a goroutine of the Shaper or the store.
func (s *Shaper) SubmitAll(jobs []*queue.Job, done func([]Receipt)) {
	if len(jobs) == 0 {
		done(nil)
		return
	}
	l := s.lookup(jobs[0])
	if l == nil {
		rcs := make([]Receipt, len(jobs))
		for i, job := range jobs {
			rcs[i] = s.submit(time.Now(), nil, job).rc
		}
		done(rcs)
		return
	}
	if !l.blocking.Load() {
		s.submitAll(time.Now(), l, jobs, done)
		return
	}
	if !s.goRemote(func() { s.submitAll(time.Now(), l, jobs, done) }) {
		rcs := make([]Receipt, len(jobs))
		for i, job := range jobs {
			rcs[i] = s.rejectBusy(l, job)
		}
		done(rcs)
	}
}

// NotQueuedError is the error of a job of an all-or-nothing request that
// was not queued because another job of it (Failed, its index) was
// refused for Reason.
type NotQueuedError struct {
	Failed int
	Reason Reason
}

func (e *NotQueuedError) Error() string {
	return fmt.Sprintf("not queued: job %d of this all-or-nothing request was rejected (%s), so none was queued", e.Failed, e.Reason)
}

// allOrNone is one SubmitAll in progress on a lane.
type allOrNone struct {
	jobs    []*queue.Job
	rcs     []Receipt
	placed  []queue.Placed
	charges []admission.Charge
	decided []admission.Answer // a blocking rule's answers, asked before the lock
}

// submitAll runs SubmitAll on l at now.
func (s *Shaper) submitAll(now time.Time, l *lane, jobs []*queue.Job, done func([]Receipt)) {
	a := &allOrNone{jobs: jobs, rcs: make([]Receipt, len(jobs)), placed: make([]queue.Placed, len(jobs))}
	if l.blocking.Load() { // ask the store first, without the lane's lock
		l.mu.Lock()
		adm := l.adm
		l.mu.Unlock()
		a.decided = make([]admission.Answer, len(jobs))
		for i, job := range jobs {
			a.decided[i] = admission.Ask(adm, job.Key, now, queue.JobCost(job))
			a.charges = append(a.charges, a.decided[i].Charge()) // all given back if one job fails
		}
	}
	l.mu.Lock()
	if l.tooManyForOne(a) {
		l.mu.Unlock()
		a.refund(s)
		done(a.rcs)
		return
	}
	failed := l.takeAll(now, a)
	if failed >= 0 {
		l.refuseAll(now, a, failed)
		l.mu.Unlock()
		a.refund(s)
		done(a.rcs)
		return
	}
	if l.q.Atomic == nil { // a memory queue placed them all
		for i, job := range jobs {
			a.rcs[i] = l.stored(now, job, a.rcs[i], a.placed[i], nil)
		}
		l.mu.Unlock()
		done(a.rcs)
		return
	}
	stored := l.q.Atomic.OfferAll(jobs, now)
	l.reschedule(now)
	l.mu.Unlock()
	stored.Then(func(ps []queue.Placed, err error) {
		l.mu.Lock()
		for i, job := range jobs {
			var p queue.Placed
			perr := err
			if err == nil {
				p = ps[i]
				if p.Duplicate {
					perr = queue.ErrDuplicate
				}
			}
			a.rcs[i] = l.stored(now, job, a.rcs[i], p, perr)
		}
		l.mu.Unlock()
		if err != nil {
			a.refund(s)
		}
		done(a.rcs)
	})
}

// takeAll runs every job's checks and admission in order, placing each on
// a memory queue (stamping it for a durable one's atomic store), and
// returns the index of the first job refused, or -1. Every job is counted
// received. Requires l.mu.
func (l *lane) takeAll(now time.Time, a *allOrNone) int {
	for i, job := range a.jobs {
		rc := l.receive(job)
		rc, ok := l.check(now, job, rc)
		if ok {
			var dec admission.Answer
			if a.decided != nil {
				dec = a.decided[i]
			} else {
				dec = admission.Ask(l.adm, job.Key, now, queue.JobCost(job))
				a.charges = append(a.charges, dec.Charge())
			}
			rc, ok = l.admitted(job, rc, dec)
		}
		if ok {
			rc, ok = l.placeOne(now, job, rc, &a.placed[i])
		}
		a.rcs[i] = rc
		if !ok {
			for j := i + 1; j < len(a.jobs); j++ {
				a.rcs[j] = l.receive(a.jobs[j])
			}
			return i
		}
	}
	return -1
}

// tooManyForOne refuses every job of a when the lane's durable queue
// cannot store that many as one; reports whether it did. Requires l.mu.
func (l *lane) tooManyForOne(a *allOrNone) bool {
	at := l.q.Atomic
	if at == nil || len(a.jobs) <= at.MaxAll() {
		return false
	}
	err := fmt.Errorf("%d jobs in an all-or-nothing request; queue %s stores at most %d as one (the server's atomic batch limit): send fewer, or send them without Shaper-Bulk-Atomic",
		len(a.jobs), l.name, at.MaxAll())
	for i, job := range a.jobs {
		a.rcs[i] = l.s.reject(l, l.receive(job), ReasonBadRequest, 0, err)
	}
	return true
}

// receive counts job received and returns its first receipt. Requires
// l.mu.
func (l *lane) receive(job *queue.Job) Receipt {
	rc := Receipt{JobID: job.ID, Downstream: job.Downstream}
	l.giveID(job, &rc)
	l.c.received++
	l.m.Received.Inc()
	return rc
}

// placeOne places job on a memory queue, or stamps it for a durable
// queue's atomic store; ok is false (rc the refusal) when the memory
// queue refused it. Requires l.mu.
func (l *lane) placeOne(now time.Time, job *queue.Job, rc Receipt, p *queue.Placed) (Receipt, bool) {
	if l.q.Atomic != nil {
		l.stamp(now, job)
		return rc, true
	}
	placed, _, err := l.enqueue(now, job).Answer()
	if err != nil {
		return l.stored(now, job, rc, placed, err), false
	}
	*p = placed
	return rc, true
}

// refuseAll takes back the jobs placed before job failed and refuses
// every other job with its reason and Retry-After. Requires l.mu.
func (l *lane) refuseAll(now time.Time, a *allOrNone, failed int) {
	if mem := l.q.Memory; mem != nil && l.q.Atomic == nil {
		for i := failed - 1; i >= 0; i-- {
			mem.Withdraw(a.jobs[i])
		}
		l.reschedule(now)
	}
	why := a.rcs[failed]
	for i := range a.rcs {
		if i == failed {
			continue
		}
		a.rcs[i] = l.s.reject(l, a.rcs[i], why.Reason, why.RetryAfter, &NotQueuedError{Failed: failed, Reason: why.Reason})
	}
}

// refund gives back every admission charge of a refused request.
func (a *allOrNone) refund(s *Shaper) {
	for _, c := range a.charges {
		s.refund(c, Receipt{})
	}
}
