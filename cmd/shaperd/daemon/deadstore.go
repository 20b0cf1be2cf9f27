package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/shaperd/shaper/config"
	"github.com/shaperd/shaper/queue/jetstream"
	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/sink"
)

// deadRefreshEvery is how often shaper_dead_letters and
// shaper_dead_letters_discarded_total are read from the store.
const deadRefreshEvery = 2 * time.Second

// deadMetrics are the dead-letter store's series, read from its Stats.
type deadMetrics struct {
	stored    *prometheus.GaugeVec
	discarded *prometheus.CounterVec
}

func newDeadMetrics(reg prometheus.Registerer) *deadMetrics {
	f := promauto.With(reg)
	return &deadMetrics{
		stored: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shaper_dead_letters",
			Help: "Dead letters stored in a downstream's dead-letter stream now (read every 2 s; 0 without JetStream).",
		}, []string{"downstream"}),
		discarded: f.NewCounterVec(prometheus.CounterOpts{
			Name: "shaper_dead_letters_discarded_total",
			Help: "Stored dead letters the store's bounds (dead_letters.max_age, max_count) discarded, the oldest first, since start.",
		}, []string{"downstream"}),
	}
}

// forDownstreams creates the series of every name.
func (m *deadMetrics) forDownstreams(names []string) {
	for _, name := range names {
		m.stored.WithLabelValues(name)
		m.discarded.WithLabelValues(name)
	}
}

// deadSettings are the dead-letter stores cfg asks for, one per downstream.
func deadSettings(cfg config.Config) []jetstream.DeadSettings {
	var out []jetstream.DeadSettings
	for _, ls := range cfg.ShaperSettings().Lanes {
		out = append(out, jetstream.DeadSettings{Downstream: ls.Name, Subject: ls.DeadLetter,
			MaxAge: ls.DeadLetters.MaxAge, MaxMsgs: ls.DeadLetters.MaxCount})
	}
	return out
}

// deadLetters is the DeadLetterer of the shaper and of intake: it stores
// each dead letter in its downstream's dead-letter stream (the message
// reaches the subject's subscribers as well), or, when the NATS server has
// no JetStream, publishes it as before. Safe for concurrent use.
type deadLetters struct {
	store *jetstream.DeadStore
	core  *sink.DeadLetters
	log   *slog.Logger
	// coreOnly is set once the server is known to have no JetStream.
	coreOnly atomic.Bool
	// mayFallBack: no durable queue is configured, so a store that finds
	// no JetStream means there is none (with durable queues, JetStream must
	// be there, and a refusal is retried rather than published unkept).
	mayFallBack bool
	once        sync.Once
}

// DeadLetter stores dl, or publishes it without JetStream.
func (d *deadLetters) DeadLetter(ctx context.Context, dl shaper.DeadLetter) error {
	if d.coreOnly.Load() {
		return d.core.DeadLetter(ctx, dl)
	}
	_, err := d.store.Put(ctx, dl.Job.Downstream, sink.DeadLetterMsg(dl))
	if err != nil && d.mayFallBack && errors.Is(err, jetstream.ErrNoJetStream) {
		d.noJetStream(err)
		return d.core.DeadLetter(ctx, dl)
	}
	return err
}

// noJetStream switches to publishing, saying so once.
func (d *deadLetters) noJetStream(err error) {
	d.coreOnly.Store(true)
	d.once.Do(func() {
		d.log.Warn("the NATS server has no JetStream: dead letters are published to their subjects but not stored; "+
			"they are lost if nobody subscribes", "error", err.Error())
	})
}

// startDeadLetters prepares the dead-letter stores of every downstream on
// st. While NATS is reachable it ensures them now: an incompatible stream
// stops start-up; a server without JetStream (and no durable queue) means
// dead letters are only published. Otherwise each store is made when its
// first dead letter comes.
func (d *Daemon) startDeadLetters(ctx context.Context, cfg config.Config, nc *nats.Conn, st *jetstream.Store) (*deadLetters, error) {
	dl := &deadLetters{store: st.Dead(), core: &sink.DeadLetters{NC: nc}, log: d.log, mayFallBack: true}
	for _, ls := range cfg.ShaperSettings().Lanes {
		dl.mayFallBack = dl.mayFallBack && !ls.Durable
	}
	set := deadSettings(cfg)
	if err := dl.store.Register(set); err != nil {
		return nil, err
	}
	if nc.IsConnected() && len(set) > 0 {
		ectx, cancel := context.WithTimeout(ctx, ensureTimeout)
		err := dl.store.Ensure(ectx, set)
		cancel()
		switch {
		case errors.Is(err, jetstream.ErrIncompatible):
			return nil, fmt.Errorf("dead-letter store: %w", err)
		case errors.Is(err, jetstream.ErrNoJetStream) && dl.mayFallBack:
			dl.noJetStream(err)
		case err != nil:
			d.log.Warn("dead-letter streams not ready yet; each is made when its first dead letter comes", "error", err.Error())
		}
	}
	if dl.coreOnly.Load() {
		d.deadPublishOnly.Store(true)
	} else {
		d.dead.Store(dl.store)
	}
	return dl, nil
}

// ensureDead applies next's dead-letter settings (reload): new downstreams
// get their stream, limits and subjects change in place. A failure is
// logged; the store tries again when a dead letter comes.
func (d *Daemon) ensureDead(next config.Config) {
	store := d.dead.Load()
	if store == nil {
		return
	}
	set := deadSettings(next)
	if err := store.Register(set); err != nil {
		d.log.Error("dead-letter settings refused", "error", err.Error())
		return
	}
	if nc := d.nc.Load(); nc == nil || !nc.IsConnected() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ensureTimeout)
	defer cancel()
	if err := store.Ensure(ctx, set); err != nil {
		d.log.Error("dead-letter streams not updated to the reloaded config; retried when a dead letter comes", "error", err.Error())
	}
}

// startDeadWorkers starts the worker that stores rejected publishes' dead
// letters and, with a store, the metrics' refresher; stop ends both.
func (d *Daemon) startDeadWorkers(dl *deadLetters) (*rejectedDL, func() error) {
	rejected, stopRejected := startRejectedDL(dl, d.jobs, d.log)
	stopRefresh := func() error { return nil }
	if store := d.dead.Load(); store != nil {
		stopRefresh = d.startDeadRefresh(store)
	}
	return rejected, func() error { return errors.Join(stopRefresh(), stopRejected()) }
}

// startDeadRefresh reads every configured downstream's store every
// deadRefreshEvery into the metrics, until the returned stop is called.
func (d *Daemon) startDeadRefresh(store *jetstream.DeadStore) func() error {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		reported := map[string]uint64{} // Discarded already added to the counter
		tick := time.NewTicker(deadRefreshEvery)
		defer tick.Stop()
		for {
			d.refreshDead(ctx, store, reported)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return func() error { cancel(); wg.Wait(); return nil }
}

// refreshDead reads each configured downstream's Stats; the series of a
// downstream no longer configured are deleted.
func (d *Daemon) refreshDead(ctx context.Context, store *jetstream.DeadStore, reported map[string]uint64) {
	names := slices.Sorted(maps.Keys(d.view.Load().known))
	d.deadMet.forDownstreams(names)
	for name := range reported {
		if !slices.Contains(names, name) {
			delete(reported, name)
			d.deadMet.stored.DeleteLabelValues(name)
			d.deadMet.discarded.DeleteLabelValues(name)
		}
	}
	for _, name := range names {
		sctx, cancel := context.WithTimeout(ctx, deadRefreshEvery)
		st, err := store.Stats(sctx, name)
		cancel()
		if err != nil {
			d.log.Debug("dead-letter stats unavailable", "downstream", name, "error", err.Error())
			continue
		}
		d.deadMet.stored.WithLabelValues(name).Set(float64(st.Count))
		if st.Discarded > reported[name] {
			d.deadMet.discarded.WithLabelValues(name).Add(float64(st.Discarded - reported[name]))
		}
		reported[name] = max(reported[name], st.Discarded)
	}
}
