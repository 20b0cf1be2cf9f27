package shaper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/admission"
	"github.com/shaperd/shaper/shaper/keep"
	"github.com/shaperd/shaper/shaper/metrics"
	"github.com/shaperd/shaper/shaper/settings"
	"github.com/shaperd/shaper/shaper/wake"
)

// Deps are the shaper's collaborators. Every field may be left zero.
type Deps struct {
	// Sinks builds a lane's sink (package sink's For); nil = none can be
	// built, so New fails for any lane. It is called by New and, for new
	// lanes or changed sink specs, by Apply.
	Sinks func(LaneSettings) (Sink, error)
	// DeadLetter publishes dead letters; nil = they are only counted and
	// logged.
	DeadLetter DeadLetterer
	// Metrics records the shaper's metrics; nil = record nothing.
	Metrics *metrics.Metrics
	// Logger receives the shaper's logs (never admission keys or payloads);
	// nil = discard.
	Logger *slog.Logger
	// Queues builds the queue of a new lane whose settings ask for it
	// (LaneSettings.Durable), with the roles its kind plays; nil, or the
	// zero Roles, = the in-memory queue. A queue.Service is started with
	// its lane and closed when its lane is gone or Run ends.
	Queues func(LaneSettings) (queue.Roles, error)
	// Admitters builds the admission rule of a lane whose
	// LaneSettings.AdmissionStore is remote (e.g. a NATS KV bucket shared
	// by instances); a nil Admitter = the in-memory limiter. It is called
	// by New and by Apply when the admission config changed; the shaper
	// does not close what it returns (its builder owns it).
	Admitters admission.Remote
	// Rates keeps what adaptive lanes learned (package keep); nil = nothing
	// is kept: a new lane starts at its ceiling.
	Rates Rates
}

// Shaper paces jobs from bounded per-downstream queues into their sinks.
// Create it with New, start it with Run; Submit, SubmitAt, Pause, Resume,
// Lanes and Apply are safe for concurrent use from any goroutine, before and
// while Run runs, and never block on I/O.
type Shaper struct {
	log   *slog.Logger
	met   *metrics.Metrics
	sinks func(LaneSettings) (Sink, error)
	qs    func(LaneSettings) (queue.Roles, error)
	adms  admission.Remote
	dlr   DeadLetterer

	// cfgMu serialises Apply and SetOverride; it guards file (the
	// settings last applied, without overrides) and overrides.
	cfgMu     sync.Mutex
	file      Settings
	overrides map[string]Override

	mu      sync.RWMutex
	active  map[string]*lane   // configured lanes by name
	all     map[*lane]struct{} // active lanes and removed ones still draining
	grace   time.Duration
	retired []Sink // replaced sinks, closed when Run ends
	// closers closes the queues of removed lanes; Run waits for it.
	closers sync.WaitGroup

	sched      *wake.Scheduler[*lane] // one goroutine and one timer for every lane
	dl         *dlWorker
	keeper     *keep.Keeper // nil without Deps.Rates
	closing    atomic.Bool
	running    atomic.Bool
	ready      chan struct{}
	deliveries workers         // runs the tries (workers.go)
	remote     sync.WaitGroup  // goRemote's submissions in flight
	remoteSem  chan struct{}   // bounds them: maxRemoteDecisions
	dctx       context.Context // cancelled when the shutdown grace runs out
	dcancel    context.CancelFunc
}

// New validates s and builds the lanes and their sinks. It starts nothing:
// jobs may be submitted at once, and start when Run runs.
func New(s Settings, deps Deps) (*Shaper, error) {
	s, err := settings.Normalize(s)
	if err != nil {
		return nil, err
	}
	sh := &Shaper{
		log: deps.Logger, met: deps.Metrics, sinks: deps.Sinks, qs: deps.Queues, adms: deps.Admitters, dlr: deps.DeadLetter,
		active: map[string]*lane{}, all: map[*lane]struct{}{}, grace: s.ShutdownGrace,
		sched: wake.New[*lane](), ready: make(chan struct{}),
		remoteSem: make(chan struct{}, maxRemoteDecisions),
	}
	if sh.log == nil {
		sh.log = slog.New(slog.DiscardHandler)
	}
	sh.keeper = keep.New(deps.Rates, sh.log)
	if sh.met == nil {
		sh.met = NewMetrics(nil)
	}
	if sh.sinks == nil {
		sh.sinks = func(LaneSettings) (Sink, error) {
			return nil, errors.New("no sink builder (Deps.Sinks)")
		}
	}
	sh.dl = newDLWorker(sh)
	sh.dctx, sh.dcancel = context.WithCancel(context.Background())
	if err := sh.Apply(s); err != nil {
		sh.dcancel()
		return nil, err
	}
	return sh, nil
}

// Ready is closed once Run has started its scheduler.
func (s *Shaper) Ready() <-chan struct{} { return s.ready }

// Run starts jobs until ctx is done, then shuts down (docs/operating.md, "Reload and shutdown"):
// intake stops (Submit answers unavailable), no new job starts, in-flight
// deliveries get Settings.ShutdownGrace to finish before their contexts are
// cancelled, every job still queued is dead-lettered with ReasonShutdown,
// and dead letters are flushed (again within the grace). Run returns only
// after every goroutine it started has exited. It may be called once.
func (s *Shaper) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return fmt.Errorf("shaper: Run called twice: %w", ErrClosed)
	}
	dlCtx, dlCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer dlCancel()
	var dlDone, keepDone sync.WaitGroup
	dlDone.Go(func() { s.dl.run(dlCtx) })
	// The keeper's last save comes after the last delivery's answer.
	keepCtx, keepCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer keepCancel()
	if s.keeper != nil {
		keepDone.Go(func() { s.keeper.Run(keepCtx, s.keptLanes) })
	}
	close(s.ready)
	s.log.Info("shaper running", "downstreams", len(s.Lanes()))

	s.sched.Run(ctx)

	s.shutdown()
	keepCancel()
	keepDone.Wait()
	s.dl.close()
	waitFor(&dlDone, s.graceNow(), func() {
		s.log.Error("dead-letter flush exceeded the shutdown grace; cancelling it")
		dlCancel()
	})
	return s.closeSinks()
}

// shutdown stops intake and starts, waits for in-flight deliveries within
// the grace, then drops every queued job with ReasonShutdown.
func (s *Shaper) shutdown() {
	s.mu.Lock()
	s.closing.Store(true) // under s.mu: Apply and goRemote check it under s.mu
	s.mu.Unlock()
	grace := s.graceNow()
	// Submissions deciding on a remote admission store finish first (each
	// is bounded by the store's timeout); they now see closing and refuse,
	// or have queued their job before the queues are drained below.
	waitFor(&s.remote, grace, func() {
		s.log.Warn("admission decisions still waiting on the store after the shutdown grace")
	})
	s.log.Info("shaper shutting down: finishing in-flight deliveries", "grace", grace)
	waitFor(&s.deliveries.inflight, grace, func() {
		s.log.Warn("in-flight deliveries exceeded the shutdown grace; cancelling them")
		s.dcancel()
	})
	s.deliveries.stop()
	s.dcancel()
	dropped := 0
	for _, l := range s.allLanes() {
		l.mu.Lock()
		for _, job := range l.q.Release() {
			l.drop(job, ReasonShutdown, "daemon shutting down")
			dropped++
		}
		l.mu.Unlock()
	}
	s.log.Info("shaper stopped starting jobs", "queued_jobs_dead_lettered", dropped)
}

func (s *Shaper) graceNow() time.Duration {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.grace
}

func (s *Shaper) allLanes() []*lane {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*lane, 0, len(s.all))
	for l := range s.all {
		out = append(out, l)
	}
	return out
}

// closeSinks closes every sink that implements io.Closer and every queue,
// once the queues of removed lanes are closed.
func (s *Shaper) closeSinks() error {
	s.closers.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	sinks := s.retired
	for l := range s.all {
		sinks = append(sinks, l.sink)
	}
	var errs []error
	for _, sk := range sinks {
		if c, ok := sk.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	for l := range s.all {
		if l.q.Service != nil {
			errs = append(errs, l.q.Service.Close())
		}
	}
	return errors.Join(errs...)
}

// forget removes a lane that was removed by Apply and has finished
// draining, and deletes its metric series.
func (s *Shaper) forget(l *lane) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l.mu.Lock()
	gone := l.idle() && !s.closing.Load()
	l.mu.Unlock()
	if _, ok := s.all[l]; !ok || !gone {
		return
	}
	s.retire(l)
	s.log.Info("removed downstream drained", "downstream", l.name)
}

// retire takes a removed lane that has finished out of the shaper: its
// sink is closed when Run ends, its metric series are deleted, and its
// queue is closed (a durable one hands fetched jobs back to the store).
// Requires s.mu.
func (s *Shaper) retire(l *lane) {
	delete(s.all, l)
	s.retired = append(s.retired, l.sink)
	s.met.Forget(l.name)
	q := l.q.Service
	if q == nil {
		return
	}
	s.closers.Go(func() { // Close waits for the queue's goroutines: not under s.mu
		if err := q.Close(); err != nil {
			s.log.Warn("closing a removed downstream's queue failed", "downstream", l.name, "error", err.Error())
		}
	})
}

// waitFor waits for wg; if that takes longer than d it calls late (which
// should make the waited-for goroutines end) and keeps waiting.
func waitFor(wg *sync.WaitGroup, d time.Duration, late func()) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		late()
		<-done
	}
}
