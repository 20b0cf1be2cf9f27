package daemon

import (
	"context"
	"fmt"
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
}

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
	if limit > 0 {
		d.log.Info("JetStream store shared: dead letters keep room of their own", "limit", what,
			"queue_shares", plan.Queue, "dead_letter_room", plan.Dead)
	}
	return nil
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
