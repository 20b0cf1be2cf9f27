package shaper

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/admission"
	"github.com/shaperd/shaper/shaper/metrics"
	"github.com/shaperd/shaper/shaper/outcome"
	"github.com/shaperd/shaper/shaper/pace"
	"github.com/shaperd/shaper/shaper/policy"
	"github.com/shaperd/shaper/shaper/wake"
)

// lane is one downstream: its queue, its schedule, its sink. Deliveries run
// on the shaper's delivery workers, each in a goroutine of its own while it
// runs (at most Concurrency at once); starts are made only by the scheduler
// goroutine through RunDue.
type lane struct {
	s    *Shaper
	name string
	m    *metrics.Lane
	// blocking is whether admission decisions do I/O, kept by
	// noteAdmitter so that every submission can ask without l.mu.
	blocking atomic.Bool

	mu       sync.Mutex
	cfg      LaneSettings  // normalized
	sched    pace.Schedule // when the next start may be, at what rate
	q        queue.Roles
	adm      admission.Admitter // nil = no admission control
	sink     Sink
	inflight int
	settling int              // durable jobs whose settling waits for their record (outcomes.go)
	perKey   policy.KeyFlight // tries in flight per key, under KeyConcurrency (keyconc.go)
	limit    int              // tries allowed in flight at the last gate
	removed  bool             // dropped from the config: no intake, drains, then goes
	noSpace  bool             // the queue's store was out of space at the last store (storefull.go)
	shown    shown
	swept    time.Time // last admission-key sweep
	keys     int       // the queue's Keys when last exported
	c        counters
	ovr      Override  // what the admin API overrides of the file's values (in cfg already)
	linger   lingering // a call that waits for more jobs (batching.go)
	recheck  time.Time // jobs accepted before it are checked against the batch's encoding (carries)
	span     spanNames // the process span's name and fixed attributes (tracing.go)
	// replayWake is closed by reschedule for replays waiting on this
	// lane (replay.go); nil while none waits.
	replayWake chan struct{}

	// The policies (package policy), each a value; policies is their Set,
	// in the order they book an answer (policies.go).
	quota    policy.Advertised
	adaptive policy.Adaptive
	brk      policy.Breaker
	pushback policy.Pushback
	pause    policy.Paused // by the admin API
	kept     policy.Kept   // the learned rate kept in Deps.Rates (learned.go)
	maint    policy.Maintenance
	policies policy.Set

	// The lane's place in the shaper's scheduler, guarded by the
	// scheduler's lock (lock order: lane.mu, then the scheduler's).
	wake *wake.Handle[*lane]
}

// counters back LaneStatus; guarded by lane.mu.
type counters struct {
	received, accepted, started, retries, pushbacks uint64
	tries                                           uint64  // tries answered (finished)
	trySeconds                                      float64 // their total duration
	rejected, dropped                               map[Reason]uint64
	delivered                                       map[Outcome]uint64 // but success:
	succeeded                                       uint64             // delivered[OutcomeSuccess]
	calls, callJobs                                 uint64             // a lane with a batch: calls started, jobs they carried
}

func newLane(s *Shaper, cfg LaneSettings, sink Sink, adm admission.Admitter, q queue.Roles, now time.Time) *lane {
	if q.Queue == nil {
		q = newMemoryQueue(cfg)
	}
	l := &lane{
		s: s, name: cfg.Name, m: s.met.ForLane(cfg.Name, cfg.MaxWait),
		q: q, sink: sink, adm: adm,
		c: counters{rejected: map[Reason]uint64{}, dropped: map[Reason]uint64{},
			delivered: map[Outcome]uint64{}},
	}
	l.wake = wake.NewHandle(l)
	l.compose()
	l.setConfig(cfg, now)
	l.noteAdmitter()
	l.m.Paused.Set(0)
	l.m.ReadFrom(l.live)
	s.met.Counts(cfg.Name, l.counts)
	if q.Service != nil {
		q.Service.Notify(l.kick)
		if err := q.Service.Start(context.Background()); err != nil {
			s.log.Error("starting a downstream's queue failed", "downstream", l.name, "error", err.Error())
		}
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

// queueSettings are cfg's settings for its queue; its drain in jobs counts
// every job of a call (batch.max_jobs).
func queueSettings(cfg LaneSettings) queue.Settings {
	n := cfg.Batch.PerCall()
	return queue.Settings{Capacity: cfg.Capacity, KeyCapacity: cfg.KeyCapacity, Weights: cfg.Weights, MaxBytes: cfg.MaxBytes,
		Priorities: cfg.Priorities, KeyConcurrency: cfg.KeyConcurrency, Rate: cfg.Rate * float64(n), Concurrency: max(cfg.Concurrency, 1) * n}
}

// kick reschedules the lane after its queue fetched jobs (a durable kind).
func (l *lane) kick() { l.kickAt(time.Now()) }

func (l *lane) kickAt(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.linger.cost = -1 // a call that waits for more may be full now (lingerUntil)
	l.noteFetched(now) // after a gap: this instance may have taken over
	g := l.gate(now)
	if (g.Held || g.NotBefore.After(now)) && !l.s.closing.Load() {
		// No start reaches the fetched jobs now (paused, an open breaker,
		// a pushback): expired ones go, not to hold the store's room
		// until one does.
		l.dropExpiredFront(now)
	}
	l.rescheduleWith(now, g)
}

// setConfig applies cfg's rate, capacity and policies at now. A new rate
// applies to queued jobs: the next start is the last start plus the new
// interval. Requires l.mu (or exclusive access).
func (l *lane) setConfig(cfg LaneSettings, now time.Time) {
	if cfg.Batch.Encoding != l.cfg.Batch.Encoding {
		l.recheck = now // jobs accepted before may not suit the new encoding (carries)
	}
	l.cfg = cfg
	l.configurePolicies(cfg)
	l.setPace(l.gate(now).Rate)
	l.q.Configure(queueSettings(cfg))
	l.perKey.SetMax(cfg.KeyConcurrency)
	l.m.Capacity.Set(float64(cfg.Capacity))
	l.m.RateConfigured.Set(cfg.Rate)
}

// RunDue starts every job the schedule allows at now, then reschedules the
// lane (wake.Item). Called by the scheduler goroutine only.
func (l *lane) RunDue(now time.Time) {
	if l.runDueLocked(now) {
		l.s.forget(l)
	}
}

// runDueLocked is RunDue under l.mu; it reports whether a removed lane is
// now finished.
func (l *lane) runDueLocked(now time.Time) (gone bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var g policy.Gate
	for {
		g = l.gate(now)
		if !l.mayStart(g) {
			break
		}
		readyAt, ok := l.nextReady()
		if !ok {
			break
		}
		slot := l.sched.SlotFor(readyAt, g.NotBefore)
		if slot.After(now) {
			break
		}
		job, ok := l.take(now)
		if !ok { // only jobs of keys at their cap were due
			break
		}
		if l.unstartable(job, now) {
			continue // dropped without consuming the slot
		}
		if l.cfg.Batch.On() {
			if !l.carries(job) {
				continue
			}
			jobs := l.gather(job, now)
			if l.lingers(jobs, now) {
				break
			}
			l.startCall(jobs, later(slot, now.Add(-pace.CatchUp)), now)
		} else {
			l.start(job, later(slot, now.Add(-pace.CatchUp)), now)
		}
		if l.inflight >= l.limit {
			// At its cap (a lane at 1 in flight, after every start): a
			// start changes no policy's Limit, so no gate taken now could
			// let another start, and rescheduleWith reads g only through
			// mayStart, false at the cap with this g as with a new one.
			break
		}
	}
	l.rescheduleWith(now, g) // nothing the policies see changed since g, or see above
	return l.idle()
}

// mayStart reports whether the lane may start a job under g (ignoring
// time: g.NotBefore goes into the slot): not held by a policy (the admin
// API's pause, a kept rate being read), under the in-flight limit, with
// fewer durable jobs waiting for their records than its concurrency (a
// crash delivers those again, so they are bounded like the jobs in
// flight: outcomes.go), and not closing.
// Requires l.mu.
func (l *lane) mayStart(g policy.Gate) bool {
	return !g.Held && l.inflight < g.Limit && l.settling < max(l.cfg.Concurrency, 1)*l.perCall() && !l.s.closing.Load()
}

// start launches one delivery on a delivery worker (package pool); slot is
// the schedule position it takes. Requires l.mu.
func (l *lane) start(job *queue.Job, slot, now time.Time) {
	l.sched.Start(slot, queue.JobCost(job))
	l.inflight++
	l.perKey.Started(job)
	job.Attempt++
	job.Slot, job.Dispatched, job.Batch = slot, now, nil
	l.policies.Started(now, policy.Try{Job: job})
	l.note(job, outcome.Started, now, told{})
	l.c.started++ // the started, in-flight and depth series read the lane when scraped
	if job.Attempt == 1 {
		l.m.Wait.Observe(now.Sub(later(job.Enqueued, job.NotBefore)).Seconds()) // a delayed job waits from its instant
	}
	l.s.deliveries.Go(delivery{l: l, sink: l.sink, retry: l.cfg.Retry, job: job, ctx: l.traceStart(now, job, nil), started: now}, now)
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
func (l *lane) drop(job *queue.Job, reason Reason, why string) { l.dropWith(job, reason, why, nil) }

// dropWith is drop of a job whose last try was answered res. Requires
// l.mu.
func (l *lane) dropWith(job *queue.Job, reason Reason, why string, res *outcome.Result) {
	l.c.dropped[reason]++
	l.m.Dropped[string(reason)].Inc()
	l.s.dl.add(l, job, reason, why, false, res)
}

// reschedule tells the scheduler when this lane next wants to start, if at
// all, as of now. Requires l.mu.
func (l *lane) reschedule(now time.Time) { l.rescheduleWith(now, l.gate(now)) }

// rescheduleWith is reschedule with g, the lane's gate at now, taken since
// the policies and the in-flight count last changed (the gate is a
// function of those and now). Requires l.mu.
func (l *lane) rescheduleWith(now time.Time, g policy.Gate) {
	l.wakeReplays()
	if l.q.Shares != nil {
		if k := l.q.Shares.Keys(); k != l.keys { // a gauge write only when it changed
			l.keys = k
			l.m.FairKeys.Set(float64(k))
		}
	}
	var at time.Time
	readyAt, ok := l.nextReady()
	if !ok {
		l.linger = lingering{} // nothing to wait for
	}
	if !l.mayStart(g) {
		ok = false // an answer or a change reschedules
	} else if ok {
		at = l.lingerUntil(l.sched.SlotFor(readyAt, g.NotBefore))
	}
	// Wake when a policy changes with time alone (a maintenance window
	// begins or ends), jobs or not, so that what the lane exports follows.
	if c := l.policies.NextChange(now); !c.IsZero() && (!ok || c.Before(at)) {
		at, ok = c, true
	}
	l.s.sched.WantAt(l.wake, at, ok)
}

// idle reports whether a removed lane has nothing left to do: no job only
// this process holds (a memory queue's; a durable queue's stay stored) and
// none in flight. Requires l.mu.
func (l *lane) idle() bool {
	return l.removed && (l.q.Memory == nil || l.q.Len() == 0) && l.inflight == 0 && l.settling == 0
}
