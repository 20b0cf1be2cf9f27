package daemon

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/shaperd/shaper/cmd/shaperd/admin"
	"github.com/shaperd/shaper/config"
)

// startAdmin starts the admin HTTP server (package admin) on cfg.Listen,
// serving the daemon's registry, shaper, readiness and history. It returns
// the server.
func (d *Daemon) startAdmin(cfg config.Admin) (*admin.Server, error) {
	srv, err := admin.Start(cfg, admin.Deps{
		Logger:      d.log,
		Registry:    d.reg,
		Downstreams: d.downstreams,
		NotReady:    d.notReady,
		History:     d.history,
		DeadLetters: deadAPI{d},
		DeadStats:   d.deadStats,
		Jobs:        d.jobRecords,
	})
	if err != nil {
		return nil, err
	}
	return srv, nil
}

// deadStats reports downstream's stored dead letters for the status page;
// ok is false without a store (no JetStream) or when it cannot answer.
func (d *Daemon) deadStats(ctx context.Context, downstream string) (int, time.Time, bool) {
	store := d.live().deadStore
	if store == nil {
		return 0, time.Time{}, false
	}
	st, err := store.Stats(ctx, downstream)
	if err != nil {
		return 0, time.Time{}, false
	}
	return st.Count, st.Oldest, true
}

// downstreams is the running shaper, or nil before Run has built it (never
// a nil *shaper.Shaper in the interface).
func (d *Daemon) downstreams() admin.Downstreams {
	if c := d.live().ctl; c != nil {
		return c
	}
	return nil
}

// jobRecords is the running shaper's job records, nil while starting.
func (d *Daemon) jobRecords() admin.Jobs {
	if sh := d.live().sh; sh != nil {
		return sh
	}
	return nil
}

// notReady lists what keeps GET /readyz from answering 200: NATS not
// connected, the intake subscription not confirmed, the daemon not running
// (starting or shutting down), and every configured durable queue whose
// stream or consumer is not in place.
func (d *Daemon) notReady() []string {
	var problems []string
	if nc := d.live().nc; nc == nil || !nc.IsConnected() {
		problems = append(problems, "NATS not connected")
	} else if !d.intakeUp.Load() {
		problems = append(problems, "intake subscription not confirmed by NATS yet")
	}
	if !d.running.Load() {
		problems = append(problems, "not running (starting or shutting down)")
	}
	return append(problems, d.queueProblems()...)
}

// queueProblems lists the configured downstreams whose durable queue is not
// ready (stream missing, incompatible, or NATS not reached yet), sorted.
func (d *Daemon) queueProblems() []string {
	var problems []string
	for name := range d.view.Load().known {
		ready, ok := d.durable.of(name)
		if !ok {
			continue // a memory queue: always ready
		}
		if err := ready(); err != nil {
			problems = append(problems, fmt.Sprintf("queue %s: %v", name, err))
		}
	}
	slices.Sort(problems)
	return problems
}
