package shaper

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/outcome"
)

// told is what a change tells beyond the job's fields: the error, the
// downstream's answer, the dead letter's sequence.
type told struct {
	err     string
	result  *outcome.Result
	seq     uint64
	inQueue bool // the queue tells the state by the job's id (outcome.Change.InQueue)
	// settle, when not nil, settles the job with its durable queue (its
	// ack, or giving it up). It runs once the change is booked, so that
	// an instance that crashes first leaves the job queued and its
	// outcome is sent by the next: at least once. It runs at once when
	// the lane keeps no records or the store is failing, and at the
	// latest after settleWithin, so that an outage of the record store
	// does not hold the drain. Jobs an instance holds unsettled come back
	// after a crash, as its jobs in flight do, so the lane starts none
	// while as many as its concurrency wait (lane.mayStart).
	settle func()
}

// settleWithin bounds how long a job's settling waits for its record.
const settleWithin = time.Second

// keeps reports whether the lane books its jobs' changes. Requires l.mu.
func (l *lane) keeps() bool { return l.s.book != nil && l.cfg.Outcomes.On() }

// note books job's change to st at now when the lane keeps records, and
// settles the job (t.settle). Requires l.mu.
func (l *lane) note(job *queue.Job, st outcome.State, now time.Time, t told) {
	if !l.keeps() {
		if t.settle != nil {
			t.settle()
		}
		return
	}
	rec := outcome.Record{JobID: job.ID, Downstream: l.name, State: st, Attempts: job.Attempt,
		AcceptedAt: job.Enqueued, NotBefore: job.NotBefore, Error: t.err, DeadLetterSeq: t.seq, Result: t.result, BatchID: job.BatchID()}
	if job.Attempt > 0 {
		rec.StartedAt = job.Dispatched
	}
	c := outcome.Change{Record: rec, Keep: l.cfg.Outcomes.Keep, Max: l.cfg.Outcomes.MaxRecords, Shared: l.q.Settler != nil,
		Events: l.cfg.Outcomes.Events, InQueue: t.inQueue}
	if st.Final() {
		c.Record.EndedAt = now
		c.ReplyTo = job.ReplyTo
		if !job.Enqueued.IsZero() {
			l.m.Ended(string(st), now.Sub(job.Enqueued))
		}
	}
	if t.settle != nil {
		if l.s.book.Failing() {
			t.settle()
		} else {
			c.Done = l.settleOnce(t.settle)
		}
	}
	l.s.book.Note(c)
}

// settleOnce returns a func that runs settle under l.mu once, whichever
// calls it first: the book once the change is booked, or a timer after
// settleWithin. A removed lane is not finished while a settling waits.
// Requires l.mu.
func (l *lane) settleOnce(settle func()) func() {
	l.settling++
	var once sync.Once
	var timer atomic.Pointer[time.Timer]
	run := func() {
		once.Do(func() {
			if t := timer.Load(); t != nil {
				t.Stop()
			}
			l.mu.Lock()
			l.settling--
			settle()
			l.reschedule(time.Now()) // a settled job may let the queue give the next
			gone := l.idle()
			l.mu.Unlock()
			if gone {
				l.s.forget(l)
			}
		})
	}
	timer.Store(time.AfterFunc(settleWithin, run))
	return run
}

// noteAccepted books an accepted job: queued, or delayed when it waits
// for its instant. A job its queue named is found there by its id until it
// starts (queue.Finder): its record is stored from then on, and intake
// stores nothing but the job. Requires l.mu.
func (l *lane) noteAccepted(job *queue.Job, now time.Time) {
	l.note(job, waitingState(job, now), now, told{inQueue: job.Named})
}

// waitingState is the state of a job that waits in its queue at now:
// queued, or delayed until its instant.
func waitingState(job *queue.Job, now time.Time) outcome.State {
	if job.NotBefore.After(now) {
		return outcome.Delayed
	}
	return outcome.Queued
}

// droppedState is the final state of a job dropped for reason.
func droppedState(r Reason) outcome.State {
	switch r {
	case ReasonExpired:
		return outcome.Expired
	case ReasonFailed:
		return outcome.Failed
	}
	return outcome.Dropped
}

// Job returns job id's record of downstream: from the shared store when
// the downstream's queue is durable, else from this process's. A job its
// queue named has no stored record while it waits, nor in the first
// moments of a try (outcome.Book holds a start back), and its queue tells
// its state (queued or delayed) by its id (queue.Finder); one found in
// neither is looked for once more after relookAfter, as a job leaves its
// queue just before its final record is stored. ok is
// false for an id with no record; shared says where it was looked up. A
// downstream that is not configured is ErrUnknownDownstream, one that
// keeps no records ErrNoRecords (both wrapped).
func (s *Shaper) Job(ctx context.Context, downstream, id string) (rec outcome.Record, ok, shared bool, err error) {
	s.mu.RLock()
	l := s.active[downstream]
	s.mu.RUnlock()
	if l == nil {
		return outcome.Record{}, false, false, fmt.Errorf("%w: %q", ErrUnknownDownstream, downstream)
	}
	l.mu.Lock()
	shared, keeps, finder := l.q.Settler != nil, l.keeps(), l.q.Finder
	l.mu.Unlock()
	if !keeps {
		return outcome.Record{}, false, shared, fmt.Errorf("%w: %s (set downstreams.%s.outcomes.keep)", ErrNoRecords, downstream, downstream)
	}
	if id == "" { // no job has this id: nothing to read
		return outcome.Record{}, false, shared, nil
	}
	for try := 0; ; try++ {
		rec, ok, err = s.lookUp(ctx, downstream, id, shared, finder)
		if ok || err != nil || finder == nil || try == 1 {
			return rec, ok, shared, err
		}
		// A job leaves its queue when it ends, and its record is
		// stored just after: look again once that is past.
		t := time.NewTimer(relookAfter)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return outcome.Record{}, false, shared, nil
		}
	}
}

// relookAfter is how long a look-up that found a job of a durable queue
// neither stored nor queued waits before it looks once more: the time
// between a job's leaving its queue and its final record's being stored,
// with room.
const relookAfter = 250 * time.Millisecond

// lookUp is one look-up of Job: the book (what is noted and not yet
// stored, and the store), then the job's queue (finder, may be nil).
func (s *Shaper) lookUp(ctx context.Context, downstream, id string, shared bool, finder queue.Finder) (outcome.Record, bool, error) {
	rec, ok, err := s.book.Get(ctx, downstream, id, shared)
	if ok || err != nil || finder == nil {
		return rec, ok, err
	}
	job, ok, err := finder.Find(ctx, id) // named by its queue, not started yet
	if !ok || err != nil {
		return outcome.Record{}, false, err
	}
	return outcome.Record{JobID: id, Downstream: downstream, State: waitingState(job, time.Now()),
		AcceptedAt: job.Enqueued, NotBefore: job.NotBefore}, true, nil
}

// LatestJobs returns the last jobs of downstream this process saw end,
// newest first (nil without records).
func (s *Shaper) LatestJobs(downstream string) []outcome.Record {
	if s.book == nil {
		return nil
	}
	return s.book.Latest(downstream)
}
