package metrics

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// jobDurationBuckets are shaper_job_duration_seconds' bounds: from a job
// that went straight through (10 ms) to one held through a day's outage.
var jobDurationBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600}

// OutcomeVecs are the series of job records and events (package
// shaper/outcome), by downstream.
type OutcomeVecs struct {
	JobDuration      *prometheus.HistogramVec // state
	Records          *prometheus.GaugeVec
	RecordsDiscarded *prometheus.CounterVec
	Events           *prometheus.CounterVec // state
}

func newOutcomeVecs(f promauto.Factory) OutcomeVecs {
	ds := []string{"downstream"}
	return OutcomeVecs{
		JobDuration: f.NewHistogramVec(prometheus.HistogramOpts{Name: "shaper_job_duration_seconds",
			Help:    "From a job's acceptance to its end, by the state it ended in (succeeded, failed, expired, dropped): the latency a producer feels. Only for downstreams that keep records (outcomes.keep).",
			Buckets: jobDurationBuckets}, []string{"downstream", "state"}),
		Records: f.NewGaugeVec(prometheus.GaugeOpts{Name: "shaper_outcome_records",
			Help: "Job records a downstream keeps (this instance's, on a memory queue; the shared store's, on a jetstream queue)."}, ds),
		RecordsDiscarded: f.NewCounterVec(prometheus.CounterOpts{Name: "shaper_outcome_records_discarded_total",
			Help: "Finished job records discarded before their outcomes.keep to keep within their room (outcomes.max_records, or the store's share)."}, ds),
		Events: f.NewCounterVec(prometheus.CounterOpts{Name: "shaper_events_published_total",
			Help: "Job state changes published as events (outcomes.events), by state."}, []string{"downstream", "state"}),
	}
}

// Ended observes a job of the lane that ended in state after d from its
// acceptance.
func (l *Lane) Ended(state string, d time.Duration) {
	if o := l.ended.get(state); o != nil {
		o.Observe(d.Seconds())
	}
}

// outcomeSeries pre-creates a lane's series of job outcomes that a
// dashboard reads from its start: the duration of the jobs that
// succeeded and the records discarded. The other states' durations and
// the events' series appear when first used (a downstream costs a
// histogram, not four, and no event series unless it publishes events).
// It returns the durations by state, created as they come.
func (m *Metrics) outcomeSeries(name string) *endedSeries {
	e := &endedSeries{m: m, name: name, by: map[string]prometheus.Observer{}}
	for _, st := range m.labels.Ended[:min(1, len(m.labels.Ended))] {
		e.by[st] = m.JobDuration.WithLabelValues(name, st)
	}
	m.RecordsDiscarded.WithLabelValues(name)
	m.Records.WithLabelValues(name)
	return e
}

// endedSeries are a lane's shaper_job_duration_seconds series by state.
type endedSeries struct {
	m    *Metrics
	name string
	mu   sync.Mutex
	by   map[string]prometheus.Observer
}

func (e *endedSeries) get(state string) prometheus.Observer {
	e.mu.Lock()
	defer e.mu.Unlock()
	o := e.by[state]
	if o == nil && slices.Contains(e.m.labels.Ended, state) {
		o = e.m.JobDuration.WithLabelValues(e.name, state)
		e.by[state] = o
	}
	return o
}

// EventTold counts an event of state published for downstream.
func (m *Metrics) EventTold(downstream, state string) {
	if m == nil {
		return
	}
	m.Events.WithLabelValues(downstream, state).Inc()
}

// RecordsDiscardedAdd counts n records of downstream discarded for room.
func (m *Metrics) RecordsDiscardedAdd(downstream string, n int) {
	if m == nil {
		return
	}
	m.RecordsDiscarded.WithLabelValues(downstream).Add(float64(n))
}

// SetRecords sets downstream's record count.
func (m *Metrics) SetRecords(downstream string, n int) {
	if m == nil {
		return
	}
	m.Records.WithLabelValues(downstream).Set(float64(n))
}
