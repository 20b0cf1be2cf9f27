package daemon

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/shaperd/shaper/config"
	"github.com/shaperd/shaper/shaper/outcome"
	"github.com/shaperd/shaper/shaper/outcome/natsout"
	"github.com/shaperd/shaper/shaper/service"
)

// Pacing of the job records' upkeep.
const (
	// outcomesEnsure bounds the creation of a downstream's record and
	// event streams.
	outcomesEnsure = 10 * time.Second
	// recordsEvery is how often shaper_outcome_records is read again.
	recordsEvery = 15 * time.Second
)

// outcomes is what the daemon keeps of job records: the book the shaper
// writes, the memory store (memory queues) and the JetStream store
// (jetstream queues; nil without JetStream).
type outcomes struct {
	book   *outcome.Book
	mem    *outcome.Memory
	shared *natsout.Store
}

// outcomesStep builds the job records' book (docs/outcomes.md) for the
// shaper, which starts and stops it; the record and event streams of the
// jetstream downstreams that keep records are created here.
func (d *Daemon) outcomesStep(ctx context.Context, w *wiring) ([]service.Service, error) {
	cfg := w.cfg
	o := &outcomes{mem: outcome.NewMemory(d.jobs.RecordsDiscardedAdd)}
	var shared outcome.Store
	if w.queues != nil || w.deadStore != nil { // the server has JetStream
		st, err := natsout.NewStore(w.nc, natsout.Settings{StreamPrefix: cfg.NATS.JetStream.StreamPrefix,
			SubjectPrefix: cfg.NATS.JetStream.SubjectPrefix, Replicas: cfg.NATS.JetStream.Replicas,
			Storage: cfg.NATS.JetStream.Storage, Logger: d.log, Discarded: d.jobs.RecordsDiscardedAdd})
		if err != nil {
			return nil, err
		}
		o.shared, shared = st, st
	}
	teller := natsout.NewTeller(w.nc, cfg.Ingress.EventsPrefix)
	obs := outcome.Observer{Told: func(ds string, st outcome.State) { d.jobs.EventTold(ds, string(st)) }}
	grace := cfg.ShutdownGrace
	o.book = outcome.NewBook(o.mem, shared, teller, obs, d.log, func() time.Duration { return grace })
	w.deps.Outcomes = o.book
	w.outcomes = o
	d.ensureOutcomes(ctx, cfg, o)
	return []service.Service{&service.Loop{Run: func(ctx context.Context) { d.countRecords(ctx, o) }}}, nil
}

// ensureOutcomes creates or updates the record and event streams of
// cfg's jetstream downstreams that keep records. A failure is logged: the
// store creates a missing stream again when it writes.
func (d *Daemon) ensureOutcomes(ctx context.Context, cfg config.Config, o *outcomes) {
	if o == nil || o.shared == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, outcomesEnsure)
	defer cancel()
	for _, name := range slices.Sorted(maps.Keys(cfg.Downstreams)) {
		ds := cfg.Downstreams[name]
		if ds.Queue.Backend != config.BackendJetStream || ds.Outcomes.Keep <= 0 {
			continue
		}
		// The records and the events share the downstream's room, half
		// each when both are kept (whole KiB).
		room := d.shares.outcomes(name)
		if ds.Outcomes.Events {
			room = room / 2 &^ 1023
		}
		keep := time.Duration(ds.Outcomes.Keep)
		if err := o.shared.Ensure(ctx, name, room, keep); err != nil {
			d.log.Error("job record stream not ready; created again when a record is written", "downstream", name, "error", err.Error())
		}
		if !ds.Outcomes.Events {
			continue
		}
		if err := o.shared.EnsureEvents(ctx, name, cfg.Ingress.EventsPrefix, room, keep); err != nil {
			d.log.Error("job event stream not ready: events are published but not stored", "downstream", name, "error", err.Error())
		}
	}
}

// countRecords sets shaper_outcome_records of every downstream that keeps
// records, every recordsEvery, until ctx is done.
func (d *Daemon) countRecords(ctx context.Context, o *outcomes) {
	t := time.NewTicker(recordsEvery)
	defer t.Stop()
	for {
		d.mu.Lock()
		cfg := d.cfg
		d.mu.Unlock()
		for name, ds := range cfg.Downstreams {
			if ds.Outcomes.Keep <= 0 {
				continue
			}
			n := o.mem.Len(name)
			if ds.Queue.Backend == config.BackendJetStream && o.shared != nil {
				rctx, cancel := context.WithTimeout(ctx, time.Second)
				c, err := o.shared.Records(rctx, name)
				cancel()
				if err != nil {
					continue
				}
				n = c
			}
			d.jobs.SetRecords(name, n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
