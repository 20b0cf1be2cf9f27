package shaper

import (
	"fmt"
	"time"
)

// An out-of-space episode: a durable queue's store refused a job for want
// of room (queue.ErrNoSpace) and has not stored one since. While it lasts
// the lane answers unavailable with a plain error, shaper_store_full is 1
// and the status says store_full; it is logged once when it begins and
// once when it ends, the first time the store takes a job again. Nothing
// is held back meanwhile: every job is offered to the store, so the
// episode ends by itself as soon as deliveries (or an operator) free room.

// outOfSpace rejects a job the queue's store had no room for, beginning an
// episode if none runs. The producer's error names the cause in plain
// words, never the store's raw answer (err, logged once). Retry-After is
// when the next start frees room, at least retryUnavailable.
// Requires l.mu.
func (l *lane) outOfSpace(now time.Time, rc Receipt, err error) Receipt {
	if !l.noSpace {
		l.noSpace = true
		l.m.StoreFull.Set(1)
		l.s.log.Error("queue store is out of space: refusing jobs (unavailable) until it has room again",
			"downstream", l.name, "error", err.Error())
	}
	return l.s.reject(l, rc, ReasonUnavailable, max(l.slotFreesIn(now), retryUnavailable),
		fmt.Errorf("queue %s: the store is out of space, so the job was not stored; room returns as queued jobs are delivered", l.name))
}

// spaceAgain ends an out-of-space episode: the store took a job.
// Requires l.mu.
func (l *lane) spaceAgain() {
	if !l.noSpace {
		return
	}
	l.noSpace = false
	l.m.StoreFull.Set(0)
	l.s.log.Info("queue store has room again: accepting jobs", "downstream", l.name)
}
