package deadletter

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/shaperd/shaper/shaper/service"
)

// refreshEvery is how often shaper_dead_letters and
// shaper_dead_letters_discarded_total are read from the store.
const refreshEvery = 2 * time.Second

// Metrics are the dead-letter store's series: what it holds, read from
// its Stats, and what replays took back. Build them with NewMetrics; a nil
// registry gives unregistered series.
type Metrics struct {
	stored    *prometheus.GaugeVec
	discarded *prometheus.CounterVec
	replayed  *prometheus.CounterVec
}

// NewMetrics registers the series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	return &Metrics{
		stored: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shaper_dead_letters",
			Help: "Dead letters stored in a downstream's dead-letter stream now (read every 2 s; 0 without JetStream).",
		}, []string{"downstream"}),
		discarded: f.NewCounterVec(prometheus.CounterOpts{
			Name: "shaper_dead_letters_discarded_total",
			Help: "Stored dead letters the store's bounds (dead_letters.max_age, max_count) discarded, the oldest first, since start.",
		}, []string{"downstream"}),
		replayed: f.NewCounterVec(prometheus.CounterOpts{
			Name: "shaper_dead_letters_replayed_total",
			Help: "Dead letters taken back into their downstream's queue by a replay (and then deleted from the store).",
		}, []string{"downstream"}),
	}
}

// ForDownstreams creates the stored and discarded series of every name
// (the Refresher keeps them from then on).
func (m *Metrics) ForDownstreams(names []string) {
	for _, n := range names {
		m.stored.WithLabelValues(n)
		m.discarded.WithLabelValues(n)
	}
}

// Labels creates the replayed series of every downstream in names and
// deletes those of downstreams in gone (a reload).
func (m *Metrics) Labels(names, gone []string) {
	for _, n := range names {
		m.replayed.WithLabelValues(n)
	}
	for _, n := range gone {
		m.replayed.DeleteLabelValues(n)
	}
}

// Refresher is the service that reads the store's Stats of every
// downstream names returns into m every refreshEvery. The stored and
// discarded series of a downstream no longer named are deleted.
func (m *Metrics) Refresher(store *Store, names func() []string, log *slog.Logger) *service.Loop {
	return &service.Loop{Run: func(ctx context.Context) {
		reported := map[string]uint64{} // Discarded already added to the counter
		tick := time.NewTicker(refreshEvery)
		defer tick.Stop()
		for {
			m.refresh(ctx, store, names(), reported, log)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}}
}

// refresh reads each of names' Stats once.
func (m *Metrics) refresh(ctx context.Context, store *Store, names []string, reported map[string]uint64, log *slog.Logger) {
	m.ForDownstreams(names)
	for name := range reported {
		if !slices.Contains(names, name) {
			delete(reported, name)
			m.stored.DeleteLabelValues(name)
			m.discarded.DeleteLabelValues(name)
		}
	}
	for _, name := range names {
		sctx, cancel := context.WithTimeout(ctx, refreshEvery)
		st, err := store.Stats(sctx, name)
		cancel()
		if err != nil {
			log.Debug("dead-letter stats unavailable", "downstream", name, "error", err.Error())
			continue
		}
		m.stored.WithLabelValues(name).Set(float64(st.Count))
		if st.Discarded > reported[name] {
			m.discarded.WithLabelValues(name).Add(float64(st.Discarded - reported[name]))
		}
		reported[name] = max(reported[name], st.Discarded)
	}
}
