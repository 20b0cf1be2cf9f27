package shaper

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Outcome is how a started job ended, the outcome label of
// shaper_jobs_delivered_total.
type Outcome string

// Delivery outcomes. A job that failed for good is dead_lettered when it was
// handed to the lane's dead-letter subject, and failed otherwise (no subject
// configured, no DeadLetterer, or publishing the dead letter failed).
const (
	OutcomeSuccess      Outcome = "success"
	OutcomeFailed       Outcome = "failed"
	OutcomeDeadLettered Outcome = "dead_lettered"
)

var (
	rejectReasons = []Reason{ReasonRateLimited, ReasonQueueFull, ReasonUnknownDownstream,
		ReasonPayloadTooLarge, ReasonBadRequest, ReasonUnavailable, ReasonWouldExpire}
	dropReasons = []Reason{ReasonExpired, ReasonShutdown}
	outcomes    = []Outcome{OutcomeSuccess, OutcomeFailed, OutcomeDeadLettered}
)

// Metrics holds the shaper's Prometheus collectors (SPEC.md "Metrics"). Every
// label value comes from a config-bounded set: configured downstream names
// (anything else is counted as "_unknown") and the fixed reasons and outcomes.
//
// A nil *Metrics is valid and records nothing. Methods are safe for
// concurrent use and never block on I/O.
type Metrics struct {
	received, accepted, started *prometheus.CounterVec
	retries, pushbacks          *prometheus.CounterVec
	rejected, dropped           *prometheus.CounterVec
	delivered                   *prometheus.CounterVec
	dlStoreErrors, dlLost       *prometheus.CounterVec
	depth, capacity, rate       *prometheus.GaugeVec
	inflight, paused            *prometheus.GaugeVec
	wait                        *waitHistograms
	duration                    *prometheus.HistogramVec
	policyMetrics
	breakerMetrics

	mu    sync.Mutex
	known map[string]int // downstream → number of live lanes using the label
}

// NewMetrics creates the collectors and registers them with reg; a nil reg
// leaves them unregistered (still usable, e.g. in tests). It panics, as
// promauto does, if reg already holds collectors of these names. The series
// for downstream "_unknown" are created at once. shaper_queue_wait_seconds
// has buckets per downstream, around its max_wait (see waitBuckets).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	ds := []string{"downstream"}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return f.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append(ds, labels...))
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return f.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, ds)
	}
	m := &Metrics{
		received:  counter("shaper_jobs_received_total", "Jobs received for a downstream, accepted or not."),
		accepted:  counter("shaper_jobs_accepted_total", "Jobs accepted into a downstream's queue."),
		started:   counter("shaper_jobs_started_total", "Delivery tries started; rate() is the achieved drain rate."),
		retries:   counter("shaper_job_retries_total", "Delivery tries scheduled again after a retryable failure."),
		pushbacks: counter("shaper_downstream_pushbacks_total", "Times a downstream pushed back (429/503 with Retry-After)."),
		rejected:  counter("shaper_jobs_rejected_total", "Jobs never accepted, by reason.", "reason"),
		dropped:   counter("shaper_jobs_dropped_total", "Jobs accepted, then dropped without delivery, by reason.", "reason"),
		delivered: counter("shaper_jobs_delivered_total", "Started jobs that ended, by outcome.", "outcome"),
		dlStoreErrors: counter("shaper_dead_letter_store_errors_total",
			"Tries to store a dead letter that failed or timed out; the job stays queued and is tried again later."),
		dlLost: counter("shaper_dead_letters_lost_total",
			"Dead letters neither stored nor published: a memory queue's job whose dead letter the store had not taken by the end of the shutdown grace, or a rejected plain publish's the store refused or fell behind on."),
		depth:    gauge("shaper_queue_depth", "Jobs held in a downstream's queue, including retries waiting for backoff."),
		capacity: gauge("shaper_queue_capacity", "Bound of a downstream's queue."),
		rate:     gauge("shaper_drain_rate_per_second", "Drain rate in starts per second: the configured rate, or the effective one under rate_control adaptive."),
		inflight: gauge("shaper_inflight", "Deliveries in progress."),
		paused:   gauge("shaper_downstream_paused", "1 while a downstream is paused by the admin API or by pushback, else 0."),
		wait:     newWaitHistograms(),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "shaper_delivery_duration_seconds",
			Help:    "Duration of one delivery try.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 17),
		}, ds),
		known:         map[string]int{},
		policyMetrics: newPolicyMetrics(f),
	}
	m.breakerMetrics = newBreakerMetrics(f)
	if reg != nil {
		reg.MustRegister(m.wait)
	}
	m.received.WithLabelValues(unknownLabel)
	for _, r := range rejectReasons {
		m.rejected.WithLabelValues(unknownLabel, string(r))
	}
	return m
}

// Received counts one job received for downstream (mapped to "_unknown" when
// no lane has that name). The shaper counts jobs passed to Submit itself;
// the daemon calls this only for jobs it rejects before Submit.
func (m *Metrics) Received(downstream string) {
	if m != nil {
		m.received.WithLabelValues(m.label(downstream)).Inc()
	}
}

// Rejected counts one job rejected with r at intake (see Received). A reason
// outside SPEC.md's rejection reasons is counted as bad_request.
func (m *Metrics) Rejected(downstream string, r Reason) {
	if m == nil {
		return
	}
	if !contains(rejectReasons, r) {
		r = ReasonBadRequest
	}
	m.rejected.WithLabelValues(m.label(downstream), string(r)).Inc()
}

// DeadLetterStoreError counts one failed try to store a dead letter of
// downstream (the daemon's, for rejected publishes; lanes count their own).
func (m *Metrics) DeadLetterStoreError(downstream string) {
	if m != nil {
		m.dlStoreErrors.WithLabelValues(m.label(downstream)).Inc()
	}
}

// DeadLetterLost counts one dead letter of downstream that was neither
// stored nor published (see DeadLetterStoreError).
func (m *Metrics) DeadLetterLost(downstream string) {
	if m != nil {
		m.dlLost.WithLabelValues(m.label(downstream)).Inc()
	}
}

// Dropped adds n jobs dropped with r (e.g. ReasonSlowConsumer) to downstream.
// A reason outside the drop reasons and ReasonSlowConsumer is ignored.
func (m *Metrics) Dropped(downstream string, r Reason, n int) {
	if m == nil || n <= 0 || !(contains(dropReasons, r) || r == ReasonSlowConsumer) {
		return
	}
	m.dropped.WithLabelValues(m.label(downstream), string(r)).Add(float64(n))
}

func (m *Metrics) label(downstream string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.known[downstream] > 0 {
		return downstream
	}
	return unknownLabel
}

func contains[T comparable](set []T, v T) bool {
	for _, s := range set {
		if s == v {
			return true
		}
	}
	return false
}

// laneMetrics are one lane's pre-resolved series, so the hot path does no
// label lookups.
type laneMetrics struct {
	received, accepted, started, retries, pushbacks prometheus.Counter
	rejected, dropped                               map[Reason]prometheus.Counter
	delivered                                       map[Outcome]prometheus.Counter
	dlStoreErrors, dlLost                           prometheus.Counter
	depth, capacity, rate, inflight, paused         prometheus.Gauge
	wait, duration                                  prometheus.Observer
	policyLane
	breakerLane
}

// forLane creates (pre-creates) every series of downstream name, whose
// lane's max_wait is maxWait (the queue-wait buckets). m must not be nil
// (New substitutes unregistered metrics for a nil Deps.Metrics).
func (m *Metrics) forLane(name string, maxWait time.Duration) *laneMetrics {
	m.mu.Lock()
	m.known[name]++
	m.mu.Unlock()
	lm := &laneMetrics{
		received: m.received.WithLabelValues(name), accepted: m.accepted.WithLabelValues(name),
		started: m.started.WithLabelValues(name), retries: m.retries.WithLabelValues(name),
		pushbacks: m.pushbacks.WithLabelValues(name),
		rejected:  map[Reason]prometheus.Counter{}, dropped: map[Reason]prometheus.Counter{},
		delivered:     map[Outcome]prometheus.Counter{},
		dlStoreErrors: m.dlStoreErrors.WithLabelValues(name), dlLost: m.dlLost.WithLabelValues(name),
		depth: m.depth.WithLabelValues(name), capacity: m.capacity.WithLabelValues(name),
		rate: m.rate.WithLabelValues(name), inflight: m.inflight.WithLabelValues(name),
		paused: m.paused.WithLabelValues(name),
		wait:   m.wait.forLane(name, maxWait), duration: m.duration.WithLabelValues(name),
	}
	for _, r := range rejectReasons {
		lm.rejected[r] = m.rejected.WithLabelValues(name, string(r))
	}
	for _, r := range dropReasons {
		lm.dropped[r] = m.dropped.WithLabelValues(name, string(r))
	}
	for _, o := range outcomes {
		lm.delivered[o] = m.delivered.WithLabelValues(name, string(o))
	}
	lm.policyLane = m.policyMetrics.forLane(name)
	lm.breakerLane = m.breakerMetrics.forLane(name)
	return lm
}

// forget deletes every series of downstream name once no lane uses it.
func (m *Metrics) forget(name string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.known[name]--; m.known[name] > 0 {
		return
	}
	delete(m.known, name)
	m.wait.forget(name)
	match := prometheus.Labels{"downstream": name}
	for _, v := range []*prometheus.MetricVec{m.received.MetricVec, m.accepted.MetricVec,
		m.started.MetricVec, m.retries.MetricVec, m.pushbacks.MetricVec, m.rejected.MetricVec,
		m.dropped.MetricVec, m.delivered.MetricVec, m.dlStoreErrors.MetricVec, m.dlLost.MetricVec,
		m.depth.MetricVec, m.capacity.MetricVec,
		m.rate.MetricVec, m.inflight.MetricVec, m.paused.MetricVec,
		m.duration.MetricVec, m.shadow.MetricVec, m.rateConfigured.MetricVec,
		m.rateCuts.MetricVec, m.fairKeys.MetricVec, m.refunds.MetricVec} {
		v.DeletePartialMatch(match)
	}
	for _, v := range m.breakerVecs() {
		v.DeletePartialMatch(match)
	}
	m.badHeaders.DeletePartialMatch(match)
}
