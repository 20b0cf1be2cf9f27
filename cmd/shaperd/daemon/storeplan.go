package daemon

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/config"
)

// storeShares is how the JetStream store is shared among the streams
// (config.StorePlan), kept for the queue factory and reloads. The zero
// value is an unbounded store: no shares. Safe for concurrent use.
type storeShares struct {
	embedded atomic.Int64 // the embedded server's own store limit; 0 = none known
	plan     atomic.Pointer[config.StorePlan]
	limit    atomic.Pointer[storeBound] // what plan shares, for a reload that cannot ask
}

// storeBound is a store's limit in bytes and how an error names it.
type storeBound struct {
	bytes int64
	what  string
}

// tighter reports whether byte bound a is below b (0: no bound).
func tighter(a, b int64) bool { return a > 0 && (b <= 0 || a < b) }

// queue is downstream name's share of the store (0: none).
func (s *storeShares) queue(name string) int64 {
	if p := s.plan.Load(); p != nil {
		return p.Queue[name]
	}
	return 0
}

// dead is the room downstream name's dead letters keep (0: no byte bound).
func (s *storeShares) dead(name string) int64 {
	if p := s.plan.Load(); p != nil {
		return p.Dead[name]
	}
	return 0
}

// outcomes is the room downstream name's records and events keep (0: no
// byte bound).
func (s *storeShares) outcomes(name string) int64 {
	if p := s.plan.Load(); p != nil {
		return p.Outcomes[name]
	}
	return 0
}

// planStore shares the store among cfg's streams when its limit is known
// (nats.embedded.max_store, else the embedded server's own; the account's
// JetStream storage limit on a remote server), and refuses to start,
// naming the bounds, when it cannot hold them.
func (d *Daemon) planStore(ctx context.Context, cfg config.Config, nc *nats.Conn) error {
	limit, what := d.storeLimit(ctx, cfg, nc)
	plan, err := cfg.StorePlan(limit, what)
	if err != nil {
		return fmt.Errorf("jetstream store: %w", err)
	}
	d.shares.plan.Store(&plan)
	d.shares.limit.Store(&storeBound{limit, what})
	if limit > 0 {
		d.log.Info("JetStream store shared: dead letters and job records keep room of their own", "limit", what,
			"queue_shares", plan.Queue, "dead_letter_room", plan.Dead, "job_record_room", plan.Outcomes)
	}
	return nil
}

// replanStore shares the store again among next's streams (a reload adds
// or removes downstreams, or changes a queue.max_bytes), with the store's
// limit read now, else the one shared at start. It returns the plan it
// replaces; an error (the store cannot hold next's bounds) keeps it.
func (d *Daemon) replanStore(next config.Config) (*config.StorePlan, error) {
	was := d.shares.plan.Load()
	var limit int64
	var what string
	if nc := d.live().nc; next.NATS.URL == "" || nc != nil {
		limit, what = d.storeLimit(context.Background(), next, nc)
	}
	if l := d.shares.limit.Load(); limit <= 0 && l != nil {
		limit, what = l.bytes, l.what
	}
	plan, err := next.StorePlan(limit, what)
	if err != nil {
		return nil, fmt.Errorf("jetstream store: %w", err)
	}
	d.shares.plan.Store(&plan)
	if limit > 0 && (was == nil || !maps.Equal(was.Queue, plan.Queue) || !maps.Equal(was.Dead, plan.Dead) || !maps.Equal(was.Outcomes, plan.Outcomes)) {
		d.log.Info("JetStream store shared again: dead letters and job records keep room of their own", "limit", what,
			"queue_shares", plan.Queue, "dead_letter_room", plan.Dead, "job_record_room", plan.Outcomes)
	}
	return was, nil
}

// setQueueShares gives each jetstream queue that old and next both have
// its share of the store now, if it changed since plan was: those whose
// share shrinks (shrink) or the others, so that a reload frees room in
// the store before it hands it out. A stream not updated now keeps its
// bound, logged, until its queue's maintenance updates it.
func (d *Daemon) setQueueShares(old, next config.Config, was *config.StorePlan, shrink bool) {
	ctx, cancel := context.WithTimeout(context.Background(), ensureTimeout)
	defer cancel()
	for _, name := range slices.Sorted(maps.Keys(next.Downstreams)) {
		o, ok := old.Downstreams[name]
		q := d.durable.queue(name)
		if !ok || o.Queue.Backend != config.BackendJetStream || next.Downstreams[name].Queue.Backend != config.BackendJetStream || q == nil {
			continue
		}
		var from int64
		if was != nil {
			from = was.Queue[name]
		}
		to := d.shares.queue(name)
		if from == to || tighter(to, from) != shrink {
			continue
		}
		if err := q.SetShare(ctx, to); err != nil {
			d.log.Warn("jetstream queue keeps its byte bound for now: its new share of the store is not applied yet; retrying",
				"downstream", name, "share", to, "error", err.Error())
		}
	}
}

// storeLimit is the store's limit in bytes and how to name it; 0 when
// it is not known (a remote server without an account limit, or not
// reachable now).
func (d *Daemon) storeLimit(ctx context.Context, cfg config.Config, nc *nats.Conn) (int64, string) {
	if cfg.NATS.URL == "" {
		if b := cfg.NATS.Embedded.MaxStore; b > 0 {
			return int64(b), "nats.embedded.max_store " + b.String()
		}
		l := d.shares.embedded.Load()
		return l, fmt.Sprintf("the embedded server's own store limit %s (set nats.embedded.max_store to choose it)", config.ByteSize(l))
	}
	if !nc.IsConnected() {
		return 0, ""
	}
	js, err := natsjs.New(nc)
	if err != nil {
		return 0, ""
	}
	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ai, err := js.AccountInfo(actx)
	if err != nil || ai.Limits.MaxStore <= 0 {
		return 0, ""
	}
	return ai.Limits.MaxStore, fmt.Sprintf("the NATS account's JetStream storage limit %s", config.ByteSize(ai.Limits.MaxStore))
}
