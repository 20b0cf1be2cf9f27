package shaper

import (
	"fmt"
	"time"

	"github.com/shaperd/shaper/queue"
)

// maxRemoteDecisions bounds the admission decisions in flight at once
// against remote stores (Admitter round trips), across all lanes. Past it a
// job is refused unavailable with a one-second Retry-After rather than
// queued behind a slow store.
const maxRemoteDecisions = 1024

// busyRetryAfter is the Retry-After of a job refused because
// maxRemoteDecisions are in flight.
const busyRetryAfter = time.Second

// noteAdmitter records in l.blocking whether l's admission decisions do
// I/O, after its admitter changed. Requires l.mu (or exclusive access).
func (l *lane) noteAdmitter() {
	l.blocking.Store(l.adm != nil && l.adm.Blocks())
}

// goRemote runs submit on its own goroutine, owned by the remote pool
// (shutdown waits for it), so that a remote admission round trip never
// holds up the caller — the daemon's intake, which serves every
// downstream. It reports false, starting nothing, when shutting down or
// when maxRemoteDecisions are already in flight.
func (s *Shaper) goRemote(submit func()) bool {
	return !s.closing.Load() && s.remote.Go(submit)
}

// rejectBusy answers a job that goRemote could not take.
func (s *Shaper) rejectBusy(l *lane, job *queue.Job) Receipt {
	rc := Receipt{JobID: job.ID, Downstream: job.Downstream}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.c.received++
	l.m.Received.Inc()
	if s.closing.Load() {
		return s.reject(l, rc, ReasonUnavailable, 0, errShuttingDown)
	}
	return s.reject(l, rc, ReasonUnavailable, busyRetryAfter,
		fmt.Errorf("downstream %s's admission store already has %d decisions waiting, so the job was not taken; retry in %s",
			l.name, maxRemoteDecisions, busyRetryAfter))
}
