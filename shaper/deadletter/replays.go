package deadletter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper"
)

// ReplayStore is what replays use of the dead-letter store (a *Store).
type ReplayStore interface {
	List(ctx context.Context, downstream string, f Filter) ([]Stored, int, error)
	Get(ctx context.Context, downstream string, seq uint64) (Stored, error)
	Delete(ctx context.Context, downstream string, seq uint64) error
}

// Target takes replayed jobs back into their lanes (a *shaper.Shaper):
// Replay waits until the lane can take the job, or ctx ends.
type Target interface {
	Replay(ctx context.Context, job *queue.Job, done func(shaper.Receipt)) error
}

// ReplayDeps are what the replayers need once the daemon runs.
type ReplayDeps struct {
	Store  ReplayStore
	Target Target
	Plans  Plans
	// KeyHeader is the producer's header that carries a job's key.
	KeyHeader string
	// Rate is downstream's configured rate; false when it is not
	// configured.
	Rate func(downstream string) (float64, bool)
}

// ReplayRequest is what an operator asks of a replay.
type ReplayRequest struct {
	Rate   float64 // replays per second; 0 = a tenth of the downstream's rate
	Reason string  // only dead letters of this reason; "" = any
	Limit  int     // at most this many; 0 = all
}

// Replays owns the paced replayers: at most one per downstream, each a
// goroutine with its own context, all ended and waited for by Stop. A replay's plan is kept in its Plans as it goes, so the
// next start resumes it. Create it with NewReplays; its methods are safe
// for concurrent use.
type Replays struct {
	log      *slog.Logger
	replayed *prometheus.CounterVec

	req sync.Mutex // serialises replace: one replay request at a time

	mu      sync.Mutex
	deps    *ReplayDeps     // nil until Attach
	ctx     context.Context // nil until Start
	cancel  context.CancelFunc
	running map[string]*replayer
	wg      sync.WaitGroup
}

// replayer is one running replay.
type replayer struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// NewReplays prepares the replayers; they count into met's
// shaper_dead_letters_replayed_total.
func NewReplays(met *Metrics, log *slog.Logger) *Replays {
	return &Replays{log: log, replayed: met.replayed, running: map[string]*replayer{}}
}

// Attach gives the replays what they run on; call it before Start.
func (r *Replays) Attach(deps *ReplayDeps) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deps = deps
}

// Start lets replays run, and resumes, in the background, every replay
// its plan store holds. Without Attach it does nothing.
func (r *Replays) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.deps == nil {
		return nil
	}
	r.ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	deps := r.deps
	r.wg.Go(func() { r.resume(r.ctx, deps) })
	return nil
}

// Stop stops every replayer (their plans stay stored) and waits for them.
// Idempotent.
func (r *Replays) Stop() error {
	r.mu.Lock()
	if r.cancel != nil {
		r.cancel()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return nil
}

// resumeEvery is how often resume tries to read the stored plans while
// NATS or JetStream does not answer.
const resumeEvery = 2 * time.Second

// resume starts a replayer for every stored plan, retrying while the
// store cannot be read; a plan for a downstream no longer configured is
// deleted.
func (r *Replays) resume(ctx context.Context, deps *ReplayDeps) {
	for {
		plans, err := deps.Plans.load(ctx)
		if err == nil {
			for _, p := range plans {
				r.resumeOne(ctx, deps, p)
			}
			return
		}
		if errors.Is(err, ErrNoJetStream) {
			r.log.Debug("no replays to resume: NATS has no JetStream", "error", err.Error())
			return
		}
		r.log.Warn("stored dead-letter replays not read yet; retrying", "error", err.Error(), "every", resumeEvery)
		if !sleepCtx(ctx, resumeEvery) {
			return
		}
	}
}

func (r *Replays) resumeOne(ctx context.Context, deps *ReplayDeps, p replayPlan) {
	if _, ok := deps.Rate(p.Downstream); !ok {
		r.log.Warn("stored dead-letter replay dropped: its downstream is no longer configured", "downstream", p.Downstream)
		_ = deps.Plans.remove(ctx, p)
		return
	}
	r.req.Lock() // not while a replay request is being answered
	defer r.req.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, busy := r.running[p.Downstream]; busy || ctx.Err() != nil {
		return // a replay asked for since start replaced this plan
	}
	r.log.Info("dead-letter replay resumed", "downstream", p.Downstream, "remaining", p.Remaining,
		"rate", p.Rate, "reason", p.Reason)
	r.launch(p)
}

// Replace starts replaying downstream's dead letters as req says,
// replacing a replay already running there, and returns how many will be
// replayed: those matching now, capped by req.Limit. It does not wait for
// the replay, which runs until done, replaced, or Stop.
func (r *Replays) Replace(ctx context.Context, downstream string, req ReplayRequest) (int, error) {
	r.req.Lock()
	defer r.req.Unlock()
	r.mu.Lock()
	deps, started := r.deps, r.ctx != nil
	r.mu.Unlock()
	if !started {
		return 0, ErrNotStarted
	}
	rate, ok := deps.Rate(downstream)
	if !ok {
		return 0, fmt.Errorf("replay %q: %w", downstream, shaper.ErrUnknownDownstream)
	}
	p := replayPlan{Downstream: downstream, Rate: req.Rate, Reason: req.Reason}
	if p.Rate == 0 {
		p.Rate = rate / 10
	}
	list, total, err := deps.Store.List(ctx, downstream, Filter{Reason: req.Reason, Limit: req.Limit})
	if err != nil {
		return 0, StoreError(err)
	}
	if p.Remaining = total; req.Limit > 0 {
		p.Remaining = min(total, req.Limit)
	}
	if len(list) > 0 {
		p.Through = list[len(list)-1].Seq // later dead letters (a replay failing again) are not this replay's
	}
	if err := deps.Plans.create(ctx, &p); err != nil {
		return 0, fmt.Errorf("replay cannot keep its progress: %w", err)
	}
	r.stop(downstream) // its plan was replaced above
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx.Err() != nil {
		return 0, errors.New("the daemon is shutting down; the replay starts with the next start")
	}
	if p.Remaining == 0 {
		_ = deps.Plans.remove(ctx, p)
		return 0, nil
	}
	r.launch(p)
	return p.Remaining, nil
}

// stop ends downstream's replayer, if one runs, and waits for it (it
// stops at its next wait, or once the lane answered its offer).
func (r *Replays) stop(downstream string) {
	r.mu.Lock()
	old := r.running[downstream]
	delete(r.running, downstream)
	r.mu.Unlock()
	if old != nil {
		old.cancel()
		<-old.done
	}
}

// launch starts p's replayer. Requires r.mu.
func (r *Replays) launch(p replayPlan) {
	ctx, cancel := context.WithCancel(r.ctx)
	rp := &replayer{cancel: cancel, done: make(chan struct{})}
	r.running[p.Downstream] = rp
	deps := r.deps
	r.wg.Go(func() {
		defer close(rp.done)
		defer cancel()
		(&replay{log: r.log.With("downstream", p.Downstream), deps: deps, plan: p,
			replayed: r.replayed.WithLabelValues(p.Downstream)}).run(ctx)
		r.mu.Lock()
		if r.running[p.Downstream] == rp {
			delete(r.running, p.Downstream)
		}
		r.mu.Unlock()
	})
}

// sleepCtx waits d, or until ctx is done (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// StoreError returns err, wrapping ErrNoJetStream when the cause is a
// JetStream request that no server answered, or that the server refused
// for want of JetStream.
func StoreError(err error) error {
	if err != nil && !errors.Is(err, ErrNoJetStream) && noJetStream(err) {
		return fmt.Errorf("%w: %w", ErrNoJetStream, err)
	}
	return err
}
