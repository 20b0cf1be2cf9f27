package natskv

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics are the store's series, labelled by downstream only (never by
// admission key). A nil *Metrics records nothing; methods are safe for
// concurrent use.
type Metrics struct {
	errors, conflicts *prometheus.CounterVec
	duration          *prometheus.HistogramVec
}

// NewMetrics creates the collectors and registers them with reg (nil = not
// registered). It panics, as promauto does, on a duplicate registration.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	ds := []string{"downstream"}
	return &Metrics{
		errors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "shaper_admission_store_errors_total",
			Help: "Admission decisions (or approximate-mode syncs) whose KV read or write failed or timed out; fail-open admitted them, fail-closed rejected them as unavailable.",
		}, ds),
		conflicts: f.NewCounterVec(prometheus.CounterOpts{
			Name: "shaper_admission_store_conflicts_total",
			Help: "Compare-and-swap writes to the admission KV that lost to another writer and were retried.",
		}, ds),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "shaper_admission_store_duration_seconds",
			Help:    "Time an admission decision spent on the KV (reads, writes, retries).",
			Buckets: prometheus.ExponentialBucketsRange(50e-6, 1, 15),
		}, ds),
	}
}

// init creates downstream's series at zero.
func (m *Metrics) init(downstream string) {
	if m == nil {
		return
	}
	m.errors.WithLabelValues(downstream)
	m.conflicts.WithLabelValues(downstream)
	m.duration.WithLabelValues(downstream)
}

func (m *Metrics) storeError(downstream string) {
	if m != nil {
		m.errors.WithLabelValues(downstream).Inc()
	}
}

func (m *Metrics) conflict(downstream string) {
	if m != nil {
		m.conflicts.WithLabelValues(downstream).Inc()
	}
}

func (m *Metrics) observe(downstream string, d time.Duration) {
	if m != nil {
		m.duration.WithLabelValues(downstream).Observe(d.Seconds())
	}
}
