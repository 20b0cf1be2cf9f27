// Package keep keeps what adaptive lanes learned (policy.Learned) in a
// store every instance can read (Rates; the daemon: a NATS KV bucket), by
// the rules of policy.Kept: the Keeper reads a lane's kept value when the
// lane becomes adaptive (Load, from the shaper's Apply) and for a takeover
// (a durable lane handed jobs after a gap: Ask), waiting at most Timeout;
// it saves the due values from one goroutine (Run) every Every, and once
// when Run ends. It sees the shaper's lanes through the small Lane
// interface and never holds a lane's lock across a store call.
package keep

import (
	"context"
	"log/slog"
	"time"

	"github.com/shaperd/shaper/shaper/policy"
	"github.com/shaperd/shaper/shaper/service"
)

// How often the Keeper saves, how long a store call may take, and how
// many takeover reads may wait for it.
const (
	Every        = 2 * time.Second
	Timeout      = time.Second
	maxTakeovers = 64 // takeover reads waiting for the keeper; beyond, the lane goes on unread
)

// Rates keeps learned values by downstream where every instance can read
// them (the daemon: a NATS KV bucket). The Keeper calls it from Load
// (the shaper's Apply) and from Run's goroutine, never under a lane's
// lock; each call is bounded by its ctx. Load reports ok false for a
// downstream with nothing kept.
type Rates interface {
	Load(ctx context.Context, downstream string) (v policy.Learned, ok bool, err error)
	Save(ctx context.Context, downstream string, v policy.Learned) error
}

// Lane is one lane as the Keeper sees it; each method takes the lane's
// lock itself.
type Lane interface {
	// KeptName is the lane's downstream, its key in Rates.
	KeptName() string
	// ToSave returns the lane's value at now, the mark to hand back to
	// Saved, and whether it is due to be saved (policy.Kept.ToSave).
	ToSave(now time.Time) (v policy.Learned, mark uint64, due bool)
	// Saved records that v was saved (policy.Kept.Saved).
	Saved(v policy.Learned, mark uint64)
	// Reloaded hands the lane what a takeover read found at now (ok false:
	// nothing kept) and lets it start again; it is called after a failed
	// read too.
	Reloaded(v policy.Learned, ok bool, now time.Time)
}

// Read is one answer of Load.
type Read struct {
	V  policy.Learned
	OK bool
}

// Keeper saves and reads kept values (see the package comment).
type Keeper struct {
	rates    Rates
	log      *slog.Logger
	lanes    func() []Lane
	reqs     chan Lane // takeover reads
	lastWarn time.Time // owned by the loop
	loop     service.Loop
}

// New returns a Keeper of r that keeps the values of lanes() and logs to
// log; nil for a nil r (nothing is kept).
func New(r Rates, log *slog.Logger, lanes func() []Lane) *Keeper {
	if r == nil {
		return nil
	}
	k := &Keeper{rates: r, log: log, lanes: lanes, reqs: make(chan Lane, maxTakeovers)}
	k.loop.Run = k.run
	return k
}

// Start starts serving takeover reads and saving the due values every
// Every.
func (k *Keeper) Start(ctx context.Context) error { return k.loop.Start(ctx) }

// Stop saves once more (within Timeout) and returns once the keeper's
// goroutine has.
func (k *Keeper) Stop() error { return k.loop.Stop() }

// Ask asks Run to read l's kept value for a takeover, and reports whether
// it will; false when the keeper is behind (the lane goes on at its
// current rate). It never blocks.
func (k *Keeper) Ask(l Lane) bool {
	select {
	case k.reqs <- l:
		return true
	default:
		return false
	}
}

// run serves takeover reads and saves the due values of lanes() every
// Every until ctx is done, then saves once more (within Timeout).
func (k *Keeper) run(ctx context.Context) {
	lanes := k.lanes
	tick := time.NewTicker(Every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), Timeout)
			k.saveAll(fctx, lanes(), time.Now())
			cancel()
			return
		case l := <-k.reqs:
			k.reload(ctx, l, time.Now())
		case now := <-tick.C:
			k.saveAll(ctx, lanes(), now)
		}
	}
}

// reload reads l's kept value for a takeover and lets the lane start again.
func (k *Keeper) reload(ctx context.Context, l Lane, now time.Time) {
	rctx, cancel := context.WithTimeout(ctx, Timeout)
	v, ok, err := k.rates.Load(rctx, l.KeptName())
	cancel()
	if err != nil {
		k.warn("reading the kept rate failed; going on at the current rate", l.KeptName(), err, now)
	}
	l.Reloaded(v, ok, now)
}

// saveAll saves every lane's value that is due, all within one Timeout.
func (k *Keeper) saveAll(ctx context.Context, lanes []Lane, now time.Time) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	for _, l := range lanes {
		v, mark, due := l.ToSave(now)
		if !due {
			continue
		}
		if err := k.rates.Save(ctx, l.KeptName(), v); err != nil {
			k.warn("saving the learned rate failed; retrying", l.KeptName(), err, now)
			continue
		}
		l.Saved(v, mark)
	}
}

// warn logs a store failure at most once a minute.
func (k *Keeper) warn(msg, downstream string, err error, now time.Time) {
	if now.Sub(k.lastWarn) < time.Minute {
		return
	}
	k.lastWarn = now
	k.log.Warn(msg, "downstream", downstream, "error", err.Error())
}

// Load reads the kept values of the downstreams names, all within
// Timeout; a failed read is logged and answers nothing kept.
func (k *Keeper) Load(names []string) map[string]Read {
	if len(names) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	out := make(map[string]Read, len(names))
	for _, name := range names {
		v, ok, err := k.rates.Load(ctx, name)
		if err != nil {
			k.log.Warn("reading the kept rate failed; starting at the ceiling", "downstream", name, "error", err.Error())
		}
		out[name] = Read{v, ok}
	}
	return out
}
