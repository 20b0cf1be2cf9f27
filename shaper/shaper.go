package shaper

import (
	"context"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/trace"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/admission"
	"github.com/shaperd/shaper/shaper/keep"
	"github.com/shaperd/shaper/shaper/metrics"
	"github.com/shaperd/shaper/shaper/outcome"
	"github.com/shaperd/shaper/shaper/pool"
	"github.com/shaperd/shaper/shaper/service"
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
	// Outcomes books what becomes of the jobs of lanes that keep records
	// (LaneSettings.Outcomes); nil = no lane keeps any. Run starts and
	// stops it.
	Outcomes *outcome.Book
	// Tracer exports a span per job start and, through the sinks, per
	// try (package tracing); nil = tracing off: nothing is exported and a
	// job's trace headers are only passed on.
	Tracer trace.Tracer
	// NewJobID gives a job offered without an ID its ID, unless its
	// lane's queue names the jobs it stores (queue.Finder); nil = 128
	// random bits in hex.
	NewJobID func() string
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
	book  *outcome.Book // nil: no records
	newID func() string

	// cfgMu serialises Apply and SetOverride; it guards file (the
	// settings last applied, without overrides) and overrides.
	cfgMu     sync.Mutex
	file      Settings
	overrides map[string]Override

	mu      sync.RWMutex
	active  map[string]*lane   // configured lanes by name
	all     map[*lane]struct{} // active lanes and removed ones still draining
	grace   time.Duration
	retired retired // removed lanes' sinks and queues

	// The background services (services.go), in the order Run starts
	// them; it stops them in reverse.
	sched      *wake.Scheduler[*lane] // one goroutine and one timer for every lane
	dl         *dlWorker
	keeper     *keep.Keeper         // nil without Deps.Rates
	deliveries *pool.Pool[delivery] // runs the tries (package pool; the task: workers.go)
	tracer     trace.Tracer         // nil: tracing off (tracing.go)
	tracing    settings.Tracing
	remote     *pool.Bounded // remote admission decisions in flight (remote_async.go)
	services   service.List

	closing atomic.Bool
	running atomic.Bool
	ready   chan struct{}
}

// New validates s and builds the lanes and their sinks. It starts nothing:
// jobs may be submitted at once, and start when Run runs.
func New(s Settings, deps Deps) (*Shaper, error) {
	s, err := settings.Normalize(s)
	if err != nil {
		return nil, err
	}
	sh := &Shaper{
		log: deps.Logger, met: deps.Metrics, sinks: deps.Sinks, qs: deps.Queues, adms: deps.Admitters, dlr: deps.DeadLetter, book: deps.Outcomes,
		newID: deps.NewJobID, tracer: deps.Tracer, tracing: s.Tracing,
		active: map[string]*lane{}, all: map[*lane]struct{}{}, grace: s.ShutdownGrace,
		sched: wake.New[*lane](), ready: make(chan struct{}),
	}
	if sh.log == nil {
		sh.log = slog.New(slog.DiscardHandler)
	}
	if sh.newID == nil {
		sh.newID = newJobID
	}
	sh.keeper = keep.New(deps.Rates, sh.log, sh.keptLanes)
	if sh.met == nil {
		sh.met = NewMetrics(nil)
	}
	if sh.sinks == nil {
		sh.sinks = func(LaneSettings) (Sink, error) {
			return nil, errors.New("no sink builder (Deps.Sinks)")
		}
	}
	sh.dl = newDLWorker(sh)
	sh.deliveries = pool.New(runDelivery, sh.graceNow, sh.log)
	sh.remote = pool.NewBounded(maxRemoteDecisions, sh.graceNow, func() {
		sh.log.Warn("admission decisions still waiting on the store after the shutdown grace")
	})
	if err := sh.Apply(s); err != nil {
		_ = sh.deliveries.Stop()
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
	err := s.services.Start(ctx, s.serviceList()...)
	if err == nil {
		close(s.ready)
		s.log.Info("shaper running", "downstreams", len(s.Lanes()))
		<-ctx.Done()
	}
	return errors.Join(err, s.services.Stop())
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
