package shaper

import (
	"context"
	"fmt"
	"time"

	"github.com/shaperd/shaper/queue"
)

// minReplayWait is the shortest RetryAfter of a busy answer, so that a
// caller that waits it out does not spin on a very fast lane.
const minReplayWait = time.Millisecond

// Replay offers a job taken from the dead-letter store back to its lane
// as soon as the lane can take it: it is TryReplay, waiting out every busy
// answer on the lane's readiness (its next free start, or any change of
// its schedule, whichever comes first) rather than answering ErrBusy. It
// returns ctx's error, without calling done, if ctx ends first; otherwise
// nil, and done is called exactly once as by TryReplayAt (never with
// ErrBusy). A replayed job taken this way starts in the first slot no
// live job needs.
func (s *Shaper) Replay(ctx context.Context, job *queue.Job, done func(Receipt)) error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait, changed, busy := s.replayAt(time.Now(), job, done)
		if !busy {
			return nil
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-timer.C:
		}
		if !timer.Stop() {
			select { // drained already, or fired after changed won
			case <-timer.C:
			default:
			}
		}
	}
}

// TryReplay offers a job taken from the dead-letter store back to its
// lane: TryReplay(job, done) is TryReplayAt(time.Now(), job, done).
func (s *Shaper) TryReplay(job *queue.Job, done func(Receipt)) { s.TryReplayAt(time.Now(), job, done) }

// TryReplayAt offers a dead letter's job back to its lane at now and calls
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
// downstream sees the same Idempotency-Key). done runs before TryReplayAt
// returns for an in-memory queue; a durable queue's store answers from its
// own goroutine, and TryReplayAt may block while its window is full.
func (s *Shaper) TryReplayAt(now time.Time, job *queue.Job, done func(Receipt)) {
	wait, _, busy := s.replayAt(now, job, done)
	if busy {
		done(Receipt{JobID: job.ID, Downstream: job.Downstream, RetryAfter: wait,
			Err: fmt.Errorf("downstream %s: %w; ask again in %s", job.Downstream, ErrBusy, wait)})
	}
}

// replayAt offers job at now. When the lane is busy it calls nothing and
// reports how long until the lane could take it and a channel closed at
// the lane's next reschedule; otherwise done gets (or will get) the answer.
func (s *Shaper) replayAt(now time.Time, job *queue.Job, done func(Receipt)) (time.Duration, <-chan struct{}, bool) {
	l := s.lookup(job)
	var sub submission
	if l == nil {
		sub = s.submit(now, nil, job) // unknown downstream or shutting down
	} else {
		var wait time.Duration
		var changed <-chan struct{}
		sub, wait, changed = l.replay(now, job, Receipt{JobID: job.ID, Downstream: job.Downstream})
		if changed != nil {
			return wait, changed, true
		}
	}
	if !sub.pending {
		done(sub.rc)
		return 0, nil, false
	}
	l.await(now, job, sub, done)
	return 0, nil, false
}

// replay is lane.submit without the admission rule (nothing is charged),
// behind the busy gate. A busy lane answers how long until it could take
// job and the channel its next reschedule closes (non-nil only then), and
// counts nothing.
func (l *lane) replay(now time.Time, job *queue.Job, rc Receipt) (submission, time.Duration, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if wait, busy := l.replayWait(now); busy {
		return submission{rc: rc}, max(wait, minReplayWait), l.replayChanged()
	}
	l.c.received++
	l.m.Received.Inc()
	rc, ok := l.check(now, job, rc)
	if !ok {
		return submission{rc: rc}, 0, nil
	}
	return l.place(now, job, rc), 0, nil
}

// replayChanged returns the channel the lane's next reschedule closes.
// Requires l.mu.
func (l *lane) replayChanged() <-chan struct{} {
	if l.replayWake == nil {
		l.replayWake = make(chan struct{})
	}
	return l.replayWake
}

// wakeReplays tells the replays waiting on this lane that its schedule
// changed (a start, a finish, a pause or resume, a new rate), so they ask
// again. Called from reschedule; requires l.mu.
func (l *lane) wakeReplays() {
	if l.replayWake != nil {
		close(l.replayWake)
		l.replayWake = nil
	}
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
	case !l.scheduled(now) || l.inflight >= l.cfg.Concurrency:
		return max(free, l.sched.Interval()), true
	case free > 0:
		return free, true
	}
	return 0, false
}
