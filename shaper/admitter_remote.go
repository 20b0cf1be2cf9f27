package shaper

import (
	"errors"
	"fmt"
	"time"

	"github.com/shaperd/shaper/limiter"
)

// Admitter is a lane's admission limiter, as Deps.Admitters builds it for a
// lane whose admission state lives outside the process (AdmissionStore):
// a per-key decision at an instant, and a sweep of idle keys. It must be
// safe for concurrent use. AllowAt may block on I/O (bounded by the
// implementation); it is never called under a lane's lock. An error
// wrapping ErrAdmissionUnavailable rejects the job as unavailable with a
// Retry-After; an error wrapping limiter.ErrCostTooLarge, or any other
// error, as bad_request.
type Admitter interface {
	AllowAt(key string, now time.Time, cost int) (limiter.Decision, error)
	Sweep(now time.Time) int
}

// ErrAdmissionUnavailable is wrapped by an Admitter's error when its store
// could not decide (fail closed): the job is rejected as unavailable.
var ErrAdmissionUnavailable = errors.New("shaper: admission store unavailable")

// AdmissionStore says where a lane's admission state lives (the config's
// admission.store and its policies). The zero value is this process's
// memory.
type AdmissionStore struct {
	// Kind is "" or "memory" for a limiter.Keyed in this process, decided
	// under the lane's lock; any other kind is built by Deps.Admitters and
	// decided outside the lane's lock.
	Kind string
	// FailClosed and Approximate are the store's policies, passed through
	// to Deps.Admitters.
	FailClosed  bool
	Approximate bool
}

// remote reports whether the store is outside the process.
func (a AdmissionStore) remote() bool { return a.Kind != "" && a.Kind != "memory" }

// newLaneAdmitter builds cfg's admitter: in memory, or through
// Deps.Admitters for a remote store; then wrapped for shadow mode.
func (s *Shaper) newLaneAdmitter(cfg LaneSettings) (admitter, error) {
	if len(cfg.Limits) > 0 {
		return s.newMultiAdmitter(cfg)
	}
	if cfg.Admission == nil || !cfg.AdmissionStore.remote() {
		return newAdmitter(cfg.Admission)
	}
	if s.adms == nil {
		return nil, fmt.Errorf("admission store %q: this shaper has no Deps.Admitters", cfg.AdmissionStore.Kind)
	}
	a, err := s.adms(cfg)
	if err != nil {
		return nil, err
	}
	if a == nil {
		return newAdmitter(cfg.Admission)
	}
	return a, nil
}

// decided is an admitter whose AllowAt answers a decision already made
// outside the lane's lock; Sweep goes to the lane's admitter.
type decided struct {
	admitter
	d   limiter.Decision
	err error
}

func (a decided) AllowAt(string, time.Time, int) (limiter.Decision, error) { return a.d, a.err }

// fullBeforeAdmission reports whether submit refuses job before reaching
// admission (shutting down, removed, or — with capacity — no room for the
// job's cost even after dropping expired jobs), for a remote lane's check
// before its decision; it matches submit's capacity test. Requires l.mu.
func (l *lane) fullBeforeAdmission(now time.Time, job *Job, capacity bool) bool {
	if l.s.closing.Load() || l.removed {
		return true
	}
	if !capacity {
		return false
	}
	full := func() bool { return l.level(now)+jobCost(job) > l.q.Cap() }
	if full() {
		l.dropExpiredFront(now)
	}
	return full()
}

// withDecision runs f under l.mu with the lane's admitter answering the
// decision (d, err) made outside the lock. Requires l.mu.
func (l *lane) withDecision(d limiter.Decision, err error, f func()) {
	saved := l.adm
	if saved != nil {
		l.adm = decided{admitter: saved, d: d, err: err}
	}
	f()
	l.adm = saved
}

// submitLocked is the locked part of SubmitAt. A lane whose admission store
// is remote decides admission outside its lock: capacity is checked first
// under the lock, as in memory, so a job refused as queue_full is not
// charged; then the decision (network I/O) runs unlocked; then submit runs
// again under the lock, re-checking capacity. If the queue filled in
// between, the job is refused queue_full although its key was charged: the
// race errs toward admitting less, never toward overfilling the queue.
func (l *lane) submitLocked(now time.Time, job *Job, rc Receipt) Receipt {
	l.mu.Lock()
	adm := l.adm
	if adm == nil || !l.cfg.AdmissionStore.remote() || l.fullBeforeAdmission(now, job, true) {
		defer l.mu.Unlock()
		return l.submit(now, job, rc)
	}
	l.mu.Unlock()
	d, err := adm.AllowAt(job.Key, now, max(job.Cost, 1))
	l.mu.Lock()
	defer l.mu.Unlock()
	l.withDecision(d, err, func() { rc = l.submit(now, job, rc) })
	return rc
}

// admitDurableLocked is admitDurable under l.mu, a remote store's decision
// made first, outside the lock (a durable queue's capacity is the store's,
// checked after admission in any case).
func (l *lane) admitDurableLocked(now time.Time, job *Job, rc Receipt) (Receipt, bool) {
	l.mu.Lock()
	adm := l.adm
	if adm == nil || !l.cfg.AdmissionStore.remote() || l.fullBeforeAdmission(now, job, false) {
		defer l.mu.Unlock()
		return l.admitDurable(now, job, rc)
	}
	l.mu.Unlock()
	d, err := adm.AllowAt(job.Key, now, max(job.Cost, 1))
	l.mu.Lock()
	defer l.mu.Unlock()
	ok := false
	l.withDecision(d, err, func() { rc, ok = l.admitDurable(now, job, rc) })
	return rc, ok
}
