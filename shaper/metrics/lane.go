package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Lane are one lane's pre-resolved series, so the hot path does no label
// lookups. Rejected, Dropped and Shadow are keyed by reason, Delivered by
// outcome: exactly the values of Labels (other keys are absent), but
// Labels.Success. The started, success, depth and in-flight series are
// not here: they are read from the lane when scraped (ReadFrom).
type Lane struct {
	Received, Accepted, Retries, Pushbacks prometheus.Counter
	Rejected, Dropped                      map[string]prometheus.Counter
	Delivered                              map[string]prometheus.Counter
	DLStoreErrors, DLLost                  prometheus.Counter
	Capacity, Rate, Paused                 prometheus.Gauge
	StoreFull                              prometheus.Gauge
	Wait, Duration                         prometheus.Observer
	PolicyLane

	live  *liveCollector
	src   *liveSource
	ended *endedSeries // shaper_job_duration_seconds by state
	name  string
	batch BatchVecs // a lane with a batch's calls (CallStarted, CallEnded)
}

// ForLane creates (pre-creates) every series of downstream name, whose
// lane's max_wait is maxWait (the queue-wait buckets), and counts one more
// live lane of that name (see Forget). m must not be nil.
func (m *Metrics) ForLane(name string, maxWait time.Duration) *Lane {
	m.mu.Lock()
	m.known[name]++
	m.mu.Unlock()
	lm := &Lane{
		Received: m.Vecs.Received.WithLabelValues(name), Accepted: m.Accepted.WithLabelValues(name),
		Retries:   m.Retries.WithLabelValues(name),
		Pushbacks: m.Pushbacks.WithLabelValues(name),
		Rejected:  map[string]prometheus.Counter{}, Dropped: map[string]prometheus.Counter{},
		Delivered:     map[string]prometheus.Counter{},
		DLStoreErrors: m.DLStoreErrors.WithLabelValues(name), DLLost: m.DLLost.WithLabelValues(name),
		Capacity: m.Capacity.WithLabelValues(name), Rate: m.Rate.WithLabelValues(name),
		Paused: m.Paused.WithLabelValues(name), StoreFull: m.StoreFull.WithLabelValues(name),
		Wait: m.wait.forLane(name, maxWait), Duration: m.dur.forLane(name, 0),
	}
	for _, r := range m.labels.Rejected {
		lm.Rejected[r] = m.Vecs.Rejected.WithLabelValues(name, r)
	}
	for _, r := range m.labels.Dropped {
		lm.Dropped[r] = m.Vecs.Dropped.WithLabelValues(name, r)
	}
	lm.live, lm.src = m.live, &liveSource{name: name, started: m.Started.WithLabelValues(name),
		depth: m.Depth.WithLabelValues(name), inflight: m.Inflight.WithLabelValues(name)}
	for _, o := range m.labels.Outcomes {
		if o == m.labels.Success {
			lm.src.succeeded = m.Delivered.WithLabelValues(name, o)
			continue
		}
		lm.Delivered[o] = m.Delivered.WithLabelValues(name, o)
	}
	m.live.add(lm.src)
	lm.PolicyLane = m.policyLane(name, m.labels.Shadow)
	lm.ended = m.outcomeSeries(name)
	lm.name, lm.batch = name, m.BatchVecs
	lm.StoreFull.Set(0)
	return lm
}
