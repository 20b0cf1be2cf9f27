package metrics

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Labels are the fixed label values the collectors pre-create and accept.
// Package shaper defines them with their types (Reason, Outcome) and passes
// them to New, so each set is written once.
type Labels struct {
	Unknown    string   // downstream label of jobs naming no live lane
	Rejected   []string // reason of shaper_jobs_rejected_total
	BadRequest string   // the rejection reason an unknown one is counted as
	Dropped    []string // reason of shaper_jobs_dropped_total, pre-created per lane
	IntakeDrop string   // a drop reason Dropped also accepts, not pre-created
	Outcomes   []string // outcome of shaper_jobs_delivered_total
	Success    string   // the outcome a lane's Live.Succeeded counts ("": none)
	Shadow     []string // reason of shaper_shadow_rejections_total
	Ended      []string // state of shaper_job_duration_seconds, the one a dashboard reads first
}

// Vecs are the collectors by downstream (and reason or outcome). Lanes
// write through their Lane and the daemon through Metrics' methods; the
// vectors are exported for reading (e.g. testutil.ToFloat64).
type Vecs struct {
	Received, Accepted, Started *prometheus.CounterVec
	Retries, Pushbacks          *prometheus.CounterVec
	Rejected, Dropped           *prometheus.CounterVec
	Delivered                   *prometheus.CounterVec
	DLStoreErrors, DLLost       *prometheus.CounterVec
	Depth, Capacity, Rate       *prometheus.GaugeVec
	Inflight, Paused            *prometheus.GaugeVec
	StoreFull                   *prometheus.GaugeVec
	PolicyVecs
	OutcomeVecs
	BatchVecs
}

// Metrics holds the shaper's Prometheus collectors. Every label value
// comes from a config-bounded set: configured downstream names (anything
// else is counted as Labels.Unknown) and the fixed reasons and outcomes.
//
// A nil *Metrics is valid for the methods below and records nothing.
// Methods are safe for concurrent use and never block on I/O.
type Metrics struct {
	Vecs
	labels Labels
	wait   *histograms // shaper_queue_wait_seconds
	dur    *histograms // shaper_delivery_duration_seconds
	counts *countsCollector
	live   *liveCollector

	mu    sync.Mutex
	known map[string]int // downstream → number of live lanes using the label
}

// New creates the collectors and registers them with reg; a nil reg
// leaves them unregistered (still usable, e.g. in tests). It panics, as
// promauto does, if reg already holds collectors of these names. The series
// for downstream labels.Unknown are created at once. shaper_queue_wait_seconds
// has buckets per downstream, around its max_wait (see waitBuckets).
func New(reg prometheus.Registerer, labels Labels) *Metrics {
	f := promauto.With(reg)
	ds := []string{"downstream"}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return f.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append(ds, labels...))
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return f.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, ds)
	}
	// The series read from the lanes when scraped are registered through
	// the live collector, which syncs them first (live.go).
	lf := promauto.With(nil)
	liveCounter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return lf.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append(ds, labels...))
	}
	liveGauge := func(name, help string) *prometheus.GaugeVec {
		return lf.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, ds)
	}
	m := &Metrics{Vecs: Vecs{
		Received:  counter("shaper_jobs_received_total", "Jobs received for a downstream, accepted or not."),
		Accepted:  counter("shaper_jobs_accepted_total", "Jobs accepted into a downstream's queue."),
		Started:   liveCounter("shaper_jobs_started_total", "Delivery tries started; rate() is the achieved drain rate."),
		Retries:   counter("shaper_job_retries_total", "Delivery tries scheduled again after a retryable failure."),
		Pushbacks: counter("shaper_downstream_pushbacks_total", "Times a downstream pushed back (429/503 with Retry-After)."),
		Rejected:  counter("shaper_jobs_rejected_total", "Jobs never accepted, by reason.", "reason"),
		Dropped:   counter("shaper_jobs_dropped_total", "Jobs accepted, then dropped without delivery, by reason.", "reason"),
		Delivered: liveCounter("shaper_jobs_delivered_total", "Started jobs that ended, by outcome.", "outcome"),
		DLStoreErrors: counter("shaper_dead_letter_store_errors_total",
			"Tries to store a dead letter that failed or timed out; the job stays queued and is tried again later."),
		DLLost: counter("shaper_dead_letters_lost_total",
			"Dead letters neither stored nor published: a memory queue's job whose dead letter the store had not taken by the end of the shutdown grace, or a rejected plain publish's the store refused or fell behind on."),
		Depth:    liveGauge("shaper_queue_depth", "Jobs held in a downstream's queue, including retries waiting for backoff."),
		Capacity: gauge("shaper_queue_capacity", "Bound of a downstream's queue."),
		Rate:     gauge("shaper_drain_rate_per_second", "Drain rate in starts per second: the configured rate, or the effective one under rate_control adaptive."),
		Inflight: liveGauge("shaper_inflight", "Deliveries in progress."),
		Paused:   gauge("shaper_downstream_paused", "1 while a downstream is paused by the admin API or by pushback, else 0."),
		StoreFull: gauge("shaper_store_full",
			"1 while a downstream's durable queue finds its store out of space (intake answers unavailable), else 0."),
		PolicyVecs:  newPolicyVecs(f),
		OutcomeVecs: newOutcomeVecs(f),
		BatchVecs:   newBatchVecs(f),
	}, labels: labels, wait: newWaitHistograms(), dur: newDurationHistograms(), counts: newCountsCollector(), known: map[string]int{}}
	m.live = newLiveCollector(m.Started, m.Delivered, m.Depth, m.Inflight)
	if reg != nil {
		reg.MustRegister(m.wait, m.dur, m.counts, m.live)
	}
	m.Vecs.Received.WithLabelValues(labels.Unknown)
	for _, r := range labels.Rejected {
		m.Vecs.Rejected.WithLabelValues(labels.Unknown, r)
	}
	return m
}

// Received counts one job received for downstream (mapped to
// Labels.Unknown when no lane has that name). The shaper counts jobs
// passed to Submit itself; the daemon calls this only for jobs it rejects
// before Submit.
func (m *Metrics) Received(downstream string) {
	if m != nil {
		m.Vecs.Received.WithLabelValues(m.label(downstream)).Inc()
	}
}

// Rejected counts one job rejected with reason at intake (see Received). A
// reason outside Labels.Rejected is counted as Labels.BadRequest.
func (m *Metrics) Rejected(downstream, reason string) {
	if m == nil {
		return
	}
	if !slices.Contains(m.labels.Rejected, reason) {
		reason = m.labels.BadRequest
	}
	m.Vecs.Rejected.WithLabelValues(m.label(downstream), reason).Inc()
}

// DeadLetterStoreError counts one failed try to store a dead letter of
// downstream (the daemon's, for rejected publishes; lanes count their own).
func (m *Metrics) DeadLetterStoreError(downstream string) {
	if m != nil {
		m.DLStoreErrors.WithLabelValues(m.label(downstream)).Inc()
	}
}

// DeadLetterLost counts one dead letter of downstream that was neither
// stored nor published (see DeadLetterStoreError).
func (m *Metrics) DeadLetterLost(downstream string) {
	if m != nil {
		m.DLLost.WithLabelValues(m.label(downstream)).Inc()
	}
}

// Dropped adds n jobs dropped with reason (e.g. Labels.IntakeDrop) to
// downstream. A reason outside Labels.Dropped and Labels.IntakeDrop is
// ignored.
func (m *Metrics) Dropped(downstream, reason string, n int) {
	if m == nil || n <= 0 || !(slices.Contains(m.labels.Dropped, reason) || reason == m.labels.IntakeDrop) {
		return
	}
	m.Vecs.Dropped.WithLabelValues(m.label(downstream), reason).Add(float64(n))
}

func (m *Metrics) label(downstream string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.known[downstream] > 0 {
		return downstream
	}
	return m.labels.Unknown
}

// Forget deletes every series of downstream name once no lane uses it (each
// ForLane is matched by one Forget). A nil m does nothing.
func (m *Metrics) Forget(name string) {
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
	m.dur.forget(name)
	m.counts.mu.Lock()
	delete(m.counts.by, name)
	m.counts.mu.Unlock()
	m.live.forget(name)
	match := prometheus.Labels{"downstream": name}
	for _, v := range []*prometheus.MetricVec{m.Vecs.Received.MetricVec, m.Accepted.MetricVec,
		m.Started.MetricVec, m.Retries.MetricVec, m.Pushbacks.MetricVec, m.Vecs.Rejected.MetricVec,
		m.Vecs.Dropped.MetricVec, m.Delivered.MetricVec, m.DLStoreErrors.MetricVec, m.DLLost.MetricVec,
		m.Depth.MetricVec, m.Capacity.MetricVec,
		m.Rate.MetricVec, m.Inflight.MetricVec, m.Paused.MetricVec, m.StoreFull.MetricVec,
		m.Shadow.MetricVec, m.RateConfigured.MetricVec,
		m.RateCuts.MetricVec, m.FairKeys.MetricVec, m.Refunds.MetricVec, m.BadHeaders.MetricVec,
		m.BreakerOpen.MetricVec, m.BreakerTrips.MetricVec, m.Maintenance.MetricVec,
		m.JobDuration.MetricVec, m.Records.MetricVec, m.RecordsDiscarded.MetricVec, m.Events.MetricVec,
		m.BatchJobs.MetricVec, m.Batches.MetricVec} {
		v.DeletePartialMatch(match)
	}
}
