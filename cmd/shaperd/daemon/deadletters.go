package daemon

import (
	"context"
	"maps"
	"slices"

	"github.com/shaperd/shaper/config"
	"github.com/shaperd/shaper/shaper/deadletter"
	"github.com/shaperd/shaper/shaper/service"
)

// deadStoreSettings place the dead-letter streams and the replays' KV
// bucket as nats.jetstream says.
func deadStoreSettings(cfg config.Config, d *Daemon) deadletter.StoreSettings {
	j := cfg.NATS.JetStream
	return deadletter.StoreSettings{StreamPrefix: j.StreamPrefix, Replicas: j.Replicas, Storage: j.Storage, Logger: d.log}
}

// deadSettings are the dead-letter streams cfg asks for, one per
// downstream, each keeping its room of a bounded store (shares).
func deadSettings(cfg config.Config, shares *storeShares) []deadletter.StreamSettings {
	var out []deadletter.StreamSettings
	for _, ls := range cfg.ShaperSettings().Lanes {
		out = append(out, deadletter.StreamSettings{Downstream: ls.Name, Subject: ls.DeadLetter,
			MaxAge: ls.DeadLetters.MaxAge, MaxMsgs: ls.DeadLetters.MaxCount, MaxBytes: shares.dead(ls.Name)})
	}
	return out
}

// startDeadLetters builds the dead-letter store and publisher on w.nc and
// keeps the store in w for the admin API, unless the server has no
// JetStream.
func (d *Daemon) startDeadLetters(ctx context.Context, w *wiring) error {
	cfg, nc := w.cfg, w.nc
	store, err := deadletter.NewStore(nc, deadStoreSettings(cfg, d))
	if err != nil {
		return err
	}
	durable := false
	for _, ls := range cfg.ShaperSettings().Lanes {
		durable = durable || ls.Durable
	}
	pub, err := deadletter.NewPublisher(ctx, nc, store, deadletter.PublisherSettings{
		Streams: deadSettings(cfg, &d.shares), Durable: durable, EnsureWithin: ensureTimeout, EnsureTry: startTry, Logger: d.log})
	if err != nil {
		return err
	}
	w.dead, w.deadPublishOnly = pub, pub.PublishOnly()
	if !w.deadPublishOnly {
		w.deadStore = store
	}
	return nil
}

// ensureDead applies next's dead-letter settings (reload): first the
// streams whose room shrinks since the store plan was, then those whose
// room grows, then the new ones, so that the room freed is there for
// the others.
func (d *Daemon) ensureDead(next config.Config, was *config.StorePlan) {
	store := d.live().deadStore
	if store == nil {
		return
	}
	set := deadSettings(next, &d.shares)
	order := func(s deadletter.StreamSettings) int {
		from, ok := int64(0), false
		if was != nil {
			from, ok = was.Dead[s.Downstream]
		}
		switch {
		case !ok && was != nil && len(was.Dead) > 0:
			return 2
		case tighter(from, s.MaxBytes):
			return 1
		}
		return 0
	}
	slices.SortStableFunc(set, func(a, b deadletter.StreamSettings) int { return order(a) - order(b) })
	deadletter.Reconfigure(store, set, ensureTimeout)
}

// knownNames is the configured downstreams, sorted.
func (d *Daemon) knownNames() []string { return slices.Sorted(maps.Keys(d.view.Load().known)) }

// replayService gives the replayers the dead-letter store, the shaper and
// a KV bucket of plans on nc; started, they resume every stored replay.
// Without a store (no JetStream) there is nothing to replay: nil.
func (d *Daemon) replayService(w *wiring) (service.Service, error) {
	cfg, nc, sh, st := w.cfg, w.nc, w.sh, w.deadStore
	if st == nil {
		return nil, nil
	}
	plans, err := deadletter.NewKVPlans(nc, deadStoreSettings(cfg, d))
	if err != nil {
		return nil, err
	}
	d.replays.Attach(&deadletter.ReplayDeps{
		Store: st, Target: sh, Plans: plans, KeyHeader: cfg.Ingress.KeyHeader,
		Rate: func(name string) (float64, bool) {
			ds, ok := d.config().Downstreams[name]
			return float64(ds.Rate), ok
		},
	})
	return d.replays, nil
}

// downstreamChanges lists next's downstreams and those of old it no
// longer has.
func downstreamChanges(old, next config.Config) (names, gone []string) {
	for name := range next.Downstreams {
		names = append(names, name)
	}
	for name := range old.Downstreams {
		if _, ok := next.Downstreams[name]; !ok {
			gone = append(gone, name)
		}
	}
	return names, gone
}
