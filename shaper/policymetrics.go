package shaper

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// policyMetrics are the collectors of a lane's policies (Policies, and
// the rate the adaptive policy and the advertised quota steer). Labels are
// downstream and reason only: fairness never puts an admission key in a
// label.
type policyMetrics struct {
	shadow         *prometheus.CounterVec
	rateConfigured *prometheus.GaugeVec
	rateCuts       *prometheus.CounterVec
	fairKeys       *prometheus.GaugeVec
	refunds        *prometheus.CounterVec
	badHeaders     *prometheus.CounterVec
}

func newPolicyMetrics(f promauto.Factory) policyMetrics {
	ds := []string{"downstream"}
	return policyMetrics{
		shadow: f.NewCounterVec(prometheus.CounterOpts{
			Name: "shaper_shadow_rejections_total",
			Help: "Jobs a policy in shadow mode would have rejected (they were accepted), by reason.",
		}, []string{"downstream", "reason"}),
		rateConfigured: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shaper_drain_rate_configured_per_second",
			Help: "Configured drain rate (the ceiling under rate_control adaptive) in starts per second.",
		}, ds),
		rateCuts: f.NewCounterVec(prometheus.CounterOpts{
			Name: "shaper_drain_rate_decreases_total",
			Help: "Times rate_control adaptive cut the drain rate after a 429/503.",
		}, ds),
		fairKeys: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shaper_fair_active_keys",
			Help: "Admission keys with queued jobs under queue.fairness key.",
		}, ds),
		refunds: f.NewCounterVec(prometheus.CounterOpts{
			Name: "shaper_admission_refunds_total",
			Help: "Charges given back to one limit of a several-limit admission rule because another limit rejected the job.",
		}, ds),
		badHeaders: f.NewCounterVec(prometheus.CounterOpts{
			Name: "shaper_downstream_bad_ratelimit_headers_total",
			Help: "Rate-limit header fields of a downstream's answers that could not be read (ignored).",
		}, ds),
	}
}

// policyLane are one lane's pre-resolved policy series.
type policyLane struct {
	shadow         map[Reason]prometheus.Counter
	rateConfigured prometheus.Gauge
	rateCuts       prometheus.Counter
	fairKeys       prometheus.Gauge
	refunds        prometheus.Counter
	badHeaders     prometheus.Counter
}

func (m policyMetrics) forLane(name string) policyLane {
	bl := policyLane{
		shadow:         map[Reason]prometheus.Counter{},
		rateConfigured: m.rateConfigured.WithLabelValues(name),
		rateCuts:       m.rateCuts.WithLabelValues(name),
		fairKeys:       m.fairKeys.WithLabelValues(name),
		refunds:        m.refunds.WithLabelValues(name),
		badHeaders:     m.badHeaders.WithLabelValues(name),
	}
	for _, r := range shadowReasons {
		bl.shadow[r] = m.shadow.WithLabelValues(name, string(r))
	}
	return bl
}
