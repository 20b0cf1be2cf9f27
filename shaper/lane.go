package shaper

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/admission"
)

// lane is one downstream: its queue, its schedule, its sink. Deliveries run
// in their own goroutines (at most Concurrency at once); starts are made only
// by the scheduler goroutine through runDue.
type lane struct {
	s    *Shaper
	name string
	m    *laneMetrics
	// blocking is whether admission decisions do I/O, kept by
	// noteAdmitter so that every submission can ask without l.mu.
	blocking atomic.Bool

	mu       sync.Mutex
	cfg      LaneSettings  // normalized
	interval time.Duration // 1/rate
	rate     float64       // effective drain rate: cfg.Rate, or lower under Adaptive
	ctl      adaptive      // adaptive rate control (LaneSettings.Adaptive)
	qs       quotaState    // the downstream's advertised quota (quota.go)
	q        queue.Roles
	adm      admission.Admitter // nil = no admission control
	sink     Sink
	next     time.Time // earliest next start on the absolute schedule
	last     time.Time // schedule slot of the last start; zero before the first
	lastCost int       // cost of the last start: it holds lastCost intervals
	inflight int
	paused   bool      // by the admin API
	pushback time.Time // paused by the downstream until then; zero = not
	removed  bool      // dropped from the config: no intake, drains, then goes
	swept    time.Time // last admission-key sweep
	keys     int       // the queue's Keys when last exported
	c        counters
	brk      breaker  // circuit breaker (breaker.go)
	kept     keptRate // the learned rate kept in Deps.Rates (learned.go)

	// Guarded by scheduler.mu.
	wake time.Time
	idx  int
}

// counters back LaneStatus; guarded by lane.mu.
type counters struct {
	received, accepted, started, retries, pushbacks uint64
	tries                                           uint64  // tries answered (finished)
	trySeconds                                      float64 // their total duration
	rejected, dropped                               map[Reason]uint64
	delivered                                       map[Outcome]uint64
}

func newLane(s *Shaper, cfg LaneSettings, sink Sink, adm admission.Admitter, q queue.Roles) *lane {
	if q.Queue == nil {
		q = newMemoryQueue(cfg)
	}
	l := &lane{
		s: s, name: cfg.Name, m: s.met.forLane(cfg.Name, cfg.MaxWait),
		q: q, sink: sink, adm: adm, idx: -1,
		c: counters{rejected: map[Reason]uint64{}, dropped: map[Reason]uint64{},
			delivered: map[Outcome]uint64{}},
	}
	l.setConfig(cfg)
	l.noteAdmitter()
	l.m.paused.Set(0)
	l.m.depth.Set(0)
	l.m.inflight.Set(0)
	if q.Service != nil {
		q.Service.Start(l.kick)
	}
	return l
}

// newMemoryQueue is the in-memory queue cfg asks for: a FIFO bucket, or
// fair between keys.
func newMemoryQueue(cfg LaneSettings) queue.Roles {
	if cfg.Fairness {
		return queue.NewFair(queueSettings(cfg)).Roles()
	}
	return queue.NewBucket(queueSettings(cfg)).Roles()
}

// queueSettings are cfg's settings for its queue.
func queueSettings(cfg LaneSettings) queue.Settings {
	return queue.Settings{Capacity: cfg.Capacity, KeyCapacity: cfg.KeyCapacity, Weights: cfg.Weights}
}

// kick reschedules the lane after its queue fetched jobs (a durable kind).
func (l *lane) kick() { l.kickAt(time.Now()) }

func (l *lane) kickAt(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m.depth.Set(float64(l.q.Len()))
	l.noteFetched(now) // after a gap: this instance may have taken over
	l.reschedule()
}

// setConfig applies cfg's rate, capacity and policies. A new rate applies to
// queued jobs: the next start is the last start plus the new interval.
// Requires l.mu (or exclusive access).
func (l *lane) setConfig(cfg LaneSettings) {
	l.cfg = cfg
	l.setRate(l.ctl.reset(cfg, l.rate))
	l.configureBreaker(cfg.Breaker)
	l.q.Configure(queueSettings(cfg))
	l.m.capacity.Set(float64(cfg.Capacity))
	l.m.rateConfigured.Set(cfg.Rate)
}

// setRate makes rate the effective drain rate; it applies to queued jobs:
// the next start is the last start plus its cost at the new interval.
// Requires l.mu.
func (l *lane) setRate(rate float64) {
	l.rate = rate
	l.interval = interval(rate)
	if !l.last.IsZero() {
		l.next = later(l.last.Add(l.drainOf(l.lastCost)), l.pushback)
	}
	l.updatePaused()
}

// runDue starts every job the schedule allows at now, then reschedules the
// lane. Called by the scheduler goroutine only.
func (l *lane) runDue(now time.Time) {
	if l.runDueLocked(now) {
		l.s.forget(l)
	}
}

// runDueLocked is runDue under l.mu; it reports whether a removed lane is
// now finished.
func (l *lane) runDueLocked(now time.Time) (gone bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.pushback.IsZero() && !now.Before(l.pushback) {
		l.pushback = time.Time{}
		l.updatePaused()
	}
	l.breakerRelease(now)
	for l.canStart() {
		l.qs.refresh(now, l.inflight)
		if held, _ := l.qs.hold(l.inflight); held {
			break
		}
		readyAt, ok := l.q.NextReady()
		if !ok {
			break
		}
		slot := l.brk.gate(later(l.next, readyAt))
		if slot.After(now) {
			break
		}
		job, _, _ := l.q.Take(now)
		if l.expired(job, now) {
			continue // dropped without consuming the slot
		}
		if job.Failures >= l.cfg.Retry.MaxAttempts { // a durable job tried before a crash
			l.fail(job, fmt.Errorf("%d attempts used (redelivered after the daemon stopped mid-delivery)", job.Failures))
			continue
		}
		l.start(job, later(slot, now.Add(-catchUp)), now)
	}
	l.reschedule()
	return l.idle()
}

// canStart reports whether the lane may start a job (ignoring time: a
// pushback pause is folded into l.next, an open breaker into its gate).
// Not while the breaker's probe is in flight, nor while a kept rate is
// being read (learned.go). Requires l.mu.
func (l *lane) canStart() bool {
	return !l.paused && l.inflight < l.maxInflight() && !l.s.closing.Load() &&
		!l.brk.blocks() && !l.kept.restoring
}

// start launches one delivery in its own goroutine; slot is the schedule
// position it takes. Requires l.mu.
func (l *lane) start(job *queue.Job, slot, now time.Time) {
	l.lastCost = queue.JobCost(job)
	l.last, l.next = slot, slot.Add(l.drainOf(l.lastCost))
	l.inflight++
	l.breakerStarted(job)
	l.qs.left--
	job.Attempt++
	job.Slot, job.Dispatched = slot, now
	l.c.started++
	l.m.started.Inc()
	l.m.inflight.Set(float64(l.inflight))
	l.m.depth.Set(float64(l.q.Len()))
	if job.Attempt == 1 {
		l.m.wait.Observe(now.Sub(job.Enqueued).Seconds())
	}
	sink, policy := l.sink, l.cfg.Retry
	l.s.deliveries.Go(func() { l.deliver(sink, policy, job, now) })
}

// expired drops job as expired when it cannot start by its deadline at now.
// Requires l.mu.
func (l *lane) expired(job *queue.Job, now time.Time) bool {
	if job.Deadline.IsZero() || !now.After(job.Deadline) {
		return false
	}
	l.drop(job, ReasonExpired, "not started within max wait")
	return true
}

// drop gives job up with reason (expired or shutdown), counts it and hands
// it to the dead-letter publisher. Requires l.mu.
func (l *lane) drop(job *queue.Job, reason Reason, why string) {
	l.c.dropped[reason]++
	l.m.dropped[reason].Inc()
	l.m.depth.Set(float64(l.q.Len()))
	l.s.dl.add(l, job, reason, why, false)
}

// reschedule tells the scheduler when this lane next wants to start, if at
// all. Requires l.mu.
func (l *lane) reschedule() {
	if l.q.Shares != nil {
		if k := l.q.Shares.Keys(); k != l.keys { // a gauge write only when it changed
			l.keys = k
			l.m.fairKeys.Set(float64(k))
		}
	}
	held, until := l.qs.hold(l.inflight)
	if !l.canStart() || held && until.IsZero() {
		l.s.sched.wantAt(l, time.Time{}, false) // an answer or a change reschedules
		return
	}
	readyAt, ok := l.q.NextReady()
	l.s.sched.wantAt(l, later(l.brk.gate(later(l.next, readyAt)), until), ok)
}

// unblock restarts the schedule no earlier than now after the lane could not
// start (idle, paused, at its concurrency cap): no catch-up burst.
// Requires l.mu.
func (l *lane) unblock(now time.Time) {
	l.next = later(l.next, now)
}

// updatePaused exports whether the lane is paused (by the admin API or a
// pushback) and its drain rate: the effective rate, 0 while paused by the
// admin API, as /v1/downstreams' effective_rate and the status page say
// (README "Metrics"; a pushback's or quota's short holds do not zero it).
// Requires l.mu.
func (l *lane) updatePaused() {
	v := 0.0
	if l.paused || !l.pushback.IsZero() {
		v = 1
	}
	l.m.paused.Set(v)
	rate := l.rate
	if l.paused {
		rate = 0
	}
	l.m.rate.Set(rate)
}

// idle reports whether a removed lane has nothing left to do: no job only
// this process holds (a memory queue's; a durable queue's stay stored) and
// none in flight. Requires l.mu.
func (l *lane) idle() bool {
	return l.removed && (l.q.Memory == nil || l.q.Len() == 0) && l.inflight == 0
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
