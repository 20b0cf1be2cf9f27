package shaper

import (
	"errors"
	"fmt"
	"time"

	"github.com/shaperd/shaper/queue"
)

// ErrBusy is wrapped by the Err of a Replay receipt when the lane had a
// live job waiting, or no free slot, at that moment: nothing was offered
// or counted, and RetryAfter says when to ask again.
var ErrBusy = errors.New("shaper: lane busy with live jobs")

// minReplayWait is the shortest RetryAfter of a busy answer, so that a
// caller that waits it out does not spin on a very fast lane.
const minReplayWait = time.Millisecond

// Replay offers a job taken from the dead-letter store back to its lane:
// Replay(job, done) is ReplayAt(time.Now(), job, done).
func (s *Shaper) Replay(job *queue.Job, done func(Receipt)) { s.ReplayAt(time.Now(), job, done) }

// ReplayAt offers a dead letter's job back to its lane at now and calls
// done exactly once with the receipt. It takes the one admission path's
// checks and queue (lane.submit: shutting down, removed, cost, capacity,
// the key's share, the predicted start; then Queue.Offer, answered once
// stored) but never the lane's admission rule: a replayed job is never
// charged to, nor refused by, a producer's limit.
//
// It only accepts when no live job is waiting for the lane's next start:
// the lane's queue is empty (retries included), the lane may start now
// (not paused, under its concurrency, no pushback), and its next slot on
// the absolute schedule is not in the future. Otherwise done gets a
// receipt with Accepted false, Err wrapping ErrBusy, no Reason, and
// RetryAfter the time until the lane could take it if nothing else
// arrived; nothing is counted then. So a replayed job always takes a slot
// that is free at the moment it is offered, and starts in it; a live job
// arriving after it waits at most the replayed job's drain time (its cost
// × 1/rate), as behind any job that arrived first.
//
// Accepted replays count as received and accepted, like any job. The
// shaper owns job on acceptance, as with SubmitFunc; job.ID is kept (the
// downstream sees the same Idempotency-Key). done runs before ReplayAt
// returns for an in-memory queue; a durable queue's store answers from its
// own goroutine, and ReplayAt may block while its window is full.
func (s *Shaper) ReplayAt(now time.Time, job *queue.Job, done func(Receipt)) {
	l := s.lookup(job)
	var rc Receipt
	var stored queue.Stored
	var pending bool
	if l == nil {
		rc, stored, pending = s.submit(now, nil, job) // unknown downstream or shutting down
	} else {
		rc, stored, pending = l.replay(now, job, Receipt{JobID: job.ID, Downstream: job.Downstream})
	}
	if !pending {
		done(rc)
		return
	}
	l.await(now, job, rc, stored, done)
}

// replay is lane.submit without the admission rule, behind the busy gate.
func (l *lane) replay(now time.Time, job *queue.Job, rc Receipt) (Receipt, queue.Stored, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if wait, busy := l.replayWait(now); busy {
		rc.RetryAfter = max(wait, minReplayWait)
		rc.Err = fmt.Errorf("downstream %s: %w; ask again in %s", l.name, ErrBusy, rc.RetryAfter)
		return rc, queue.Stored{}, false
	}
	l.c.received++
	l.m.received.Inc()
	rc, ok := l.check(now, job, rc)
	if !ok {
		return rc, queue.Stored{}, false
	}
	return l.place(now, job, rc)
}

// replayWait reports whether a replayed job would wait behind, or take
// the slot of, a live job at now, and if so how long until it would not.
// A lane that is shutting down or removed is not busy: check refuses it.
// Requires l.mu.
func (l *lane) replayWait(now time.Time) (time.Duration, bool) {
	if l.s.closing.Load() || l.removed {
		return 0, false
	}
	free := l.nextStartAt(now).Sub(now) // until the next slot is due
	switch {
	case l.q.Len() > 0: // live jobs wait: at best they have all started after their drain time
		return max(free, 0) + l.drainOf(l.q.Cost()), true
	case l.paused || l.inflight >= l.cfg.Concurrency:
		return max(free, l.sched.interval), true
	case free > 0:
		return free, true
	}
	return 0, false
}
