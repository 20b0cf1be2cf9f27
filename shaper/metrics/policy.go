package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// PolicyVecs are the collectors of a lane's policies (shadow mode, the
// rate the adaptive policy and the advertised quota steer, fairness,
// several-limit refunds, the breaker). Labels are downstream and reason
// only: fairness never puts an admission key in a label.
type PolicyVecs struct {
	Shadow         *prometheus.CounterVec
	RateConfigured *prometheus.GaugeVec
	RateCuts       *prometheus.CounterVec
	FairKeys       *prometheus.GaugeVec
	Refunds        *prometheus.CounterVec
	BadHeaders     *prometheus.CounterVec
	BreakerOpen    *prometheus.GaugeVec
	BreakerTrips   *prometheus.CounterVec
	Maintenance    *prometheus.GaugeVec
}

func newPolicyVecs(f promauto.Factory) PolicyVecs {
	ds := []string{"downstream"}
	return PolicyVecs{
		Shadow: f.NewCounterVec(prometheus.CounterOpts{
			Name: "shaper_shadow_rejections_total",
			Help: "Jobs a policy in shadow mode would have rejected (they were accepted), by reason.",
		}, []string{"downstream", "reason"}),
		RateConfigured: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shaper_drain_rate_configured_per_second",
			Help: "Configured drain rate (the ceiling under rate_control adaptive) in starts per second.",
		}, ds),
		RateCuts: f.NewCounterVec(prometheus.CounterOpts{
			Name: "shaper_drain_rate_decreases_total",
			Help: "Times rate_control adaptive cut the drain rate after a 429/503.",
		}, ds),
		FairKeys: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shaper_fair_active_keys",
			Help: "Admission keys with queued jobs under queue.fairness key.",
		}, ds),
		Refunds: f.NewCounterVec(prometheus.CounterOpts{
			Name: "shaper_admission_refunds_total",
			Help: "Admission charges given back: to the limits of a several-limit rule when another limit rejected the job, or to the rule when the queue's store failed or refused a job it admitted.",
		}, ds),
		BadHeaders: f.NewCounterVec(prometheus.CounterOpts{
			Name: "shaper_downstream_bad_ratelimit_headers_total",
			Help: "Rate-limit header fields of a downstream's answers that could not be read (ignored).",
		}, ds),
		BreakerOpen: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shaper_breaker_open",
			Help: "1 while a downstream's circuit breaker is open or half-open (jobs held), else 0.",
		}, ds),
		BreakerTrips: f.NewCounterVec(prometheus.CounterOpts{
			Name: "shaper_breaker_trips_total",
			Help: "Times a downstream's circuit breaker opened after consecutive failed tries (reopenings after a failed probe not counted).",
		}, ds),
		Maintenance: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shaper_maintenance",
			Help: "1 while a downstream is in one of its maintenance windows (no starts; intake goes on), else 0.",
		}, ds),
	}
}

// PolicyLane are one lane's pre-resolved policy series; Shadow is keyed by
// reason (Labels.Shadow).
type PolicyLane struct {
	Shadow         map[string]prometheus.Counter
	RateConfigured prometheus.Gauge
	RateCuts       prometheus.Counter
	FairKeys       prometheus.Gauge
	Refunds        prometheus.Counter
	BadHeaders     prometheus.Counter
	BreakerOpen    prometheus.Gauge
	BreakerTrips   prometheus.Counter
	Maintenance    prometheus.Gauge
}

// policyLane resolves downstream name's policy series; the breaker starts
// closed (shaper_breaker_open 0).
func (v PolicyVecs) policyLane(name string, shadow []string) PolicyLane {
	pl := PolicyLane{
		Shadow:         map[string]prometheus.Counter{},
		RateConfigured: v.RateConfigured.WithLabelValues(name),
		RateCuts:       v.RateCuts.WithLabelValues(name),
		FairKeys:       v.FairKeys.WithLabelValues(name),
		Refunds:        v.Refunds.WithLabelValues(name),
		BadHeaders:     v.BadHeaders.WithLabelValues(name),
		BreakerOpen:    v.BreakerOpen.WithLabelValues(name),
		BreakerTrips:   v.BreakerTrips.WithLabelValues(name),
		Maintenance:    v.Maintenance.WithLabelValues(name),
	}
	for _, r := range shadow {
		pl.Shadow[r] = v.Shadow.WithLabelValues(name, r)
	}
	pl.BreakerOpen.Set(0)
	pl.Maintenance.Set(0)
	return pl
}
