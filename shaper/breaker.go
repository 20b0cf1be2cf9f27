package shaper

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/shaperd/shaper/shaper/policy"
)

// A lane's circuit breaker (LaneSettings.Breaker) is a policy.Breaker;
// these names are its settings and states as the shaper's API shows them.
const (
	DefaultBreakerOpenFor    = policy.DefaultBreakerOpenFor
	DefaultBreakerMaxOpenFor = policy.DefaultBreakerMaxOpenFor
)

// BreakerSettings configure a lane's circuit breaker (policy.Breaker); the
// zero value turns it off.
type BreakerSettings = policy.BreakerSettings

// BreakerState is a breaker's state as GET /v1/downstreams shows it.
type BreakerState = policy.BreakerState

// Breaker states. A lane without a breaker is always closed.
const (
	BreakerClosed   = policy.BreakerClosed
	BreakerOpen     = policy.BreakerOpen
	BreakerHalfOpen = policy.BreakerHalfOpen
)

// normalizeBreaker validates and defaults b.
func normalizeBreaker(b *BreakerSettings, bad func(string, ...any)) {
	if b.Failures < 0 || b.OpenFor < 0 || b.MaxOpenFor < 0 {
		bad("breaker: values must be >= 0, got %+v", *b)
	}
	if b.Failures <= 0 {
		return
	}
	b.OpenFor = cmp0(b.OpenFor, DefaultBreakerOpenFor)
	b.MaxOpenFor = cmp0(b.MaxOpenFor, max(DefaultBreakerMaxOpenFor, b.OpenFor))
	if b.MaxOpenFor < b.OpenFor {
		bad("breaker: max open for %s is below open for %s", b.MaxOpenFor, b.OpenFor)
	}
}

// breakerMetrics are the breaker's collectors, by downstream.
type breakerMetrics struct {
	breakerOpen  *prometheus.GaugeVec
	breakerTrips *prometheus.CounterVec
}

func newBreakerMetrics(f promauto.Factory) breakerMetrics {
	ds := []string{"downstream"}
	return breakerMetrics{
		breakerOpen: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shaper_breaker_open",
			Help: "1 while a downstream's circuit breaker is open or half-open (jobs held), else 0.",
		}, ds),
		breakerTrips: f.NewCounterVec(prometheus.CounterOpts{
			Name: "shaper_breaker_trips_total",
			Help: "Times a downstream's circuit breaker opened after consecutive failed tries (reopenings after a failed probe not counted).",
		}, ds),
	}
}

// vecs are the collectors to delete a downstream's series from.
func (m breakerMetrics) breakerVecs() []*prometheus.MetricVec {
	return []*prometheus.MetricVec{m.breakerOpen.MetricVec, m.breakerTrips.MetricVec}
}

// breakerLane are one lane's pre-resolved breaker series.
type breakerLane struct {
	breakerOpen  prometheus.Gauge
	breakerTrips prometheus.Counter
}

func (m breakerMetrics) forLane(name string) breakerLane {
	bl := breakerLane{breakerOpen: m.breakerOpen.WithLabelValues(name), breakerTrips: m.breakerTrips.WithLabelValues(name)}
	bl.breakerOpen.Set(0)
	return bl
}
