package shaper

import (
	"context"
	"fmt"
	"sync"
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

// remote is the service that owns the submissions deciding on a remote
// admission store: each runs on a goroutine of its own, at most
// maxRemoteDecisions at once. Its Stop closes intake and waits for them.
type remote struct {
	s        *Shaper
	grace    func() time.Duration
	sem      chan struct{}
	inflight sync.WaitGroup
}

func (r *remote) init(s *Shaper, grace func() time.Duration) {
	r.s, r.grace, r.sem = s, grace, make(chan struct{}, maxRemoteDecisions)
}

// Start does nothing: a decision starts with its submission (goRemote).
func (r *remote) Start(context.Context) error { return nil }

// Stop closes intake (Submit answers unavailable from now on) and waits
// for the decisions in flight, each bounded by its store's timeout: they
// now see closing and refuse, or have queued their job before the queues
// are drained.
func (r *remote) Stop() error {
	r.s.mu.Lock()
	r.s.closing.Store(true) // under s.mu: Apply and goRemote check it under s.mu
	r.s.mu.Unlock()
	waitGrace(waitGroupDone(&r.inflight), r.grace(), func() {
		r.s.log.Warn("admission decisions still waiting on the store after the shutdown grace")
	})
	return nil
}

// goRemote runs submit on its own goroutine, owned by the remote service
// (shutdown waits for it), so that a remote admission round trip never
// holds up the caller — the daemon's intake, which serves every
// downstream. It reports false, starting nothing, when shutting down or
// when maxRemoteDecisions are already in flight.
func (s *Shaper) goRemote(submit func()) bool {
	// The Add happens under s.mu with closing false; Stop sets closing
	// under s.mu before it Waits, so no Add can race the Wait.
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closing.Load() {
		return false
	}
	select {
	case s.remote.sem <- struct{}{}:
	default:
		return false
	}
	s.remote.inflight.Go(func() {
		defer func() { <-s.remote.sem }()
		submit()
	})
	return true
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
