package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Lane are one lane's pre-resolved series, so the hot path does no label
// lookups. Rejected, Dropped and Shadow are keyed by reason, Delivered by
// outcome: exactly the values of Labels (other keys are absent).
type Lane struct {
	Received, Accepted, Started, Retries, Pushbacks prometheus.Counter
	Rejected, Dropped                               map[string]prometheus.Counter
	Delivered                                       map[string]prometheus.Counter
	DLStoreErrors, DLLost                           prometheus.Counter
	Depth, Capacity, Rate, Inflight, Paused         prometheus.Gauge
	StoreFull                                       prometheus.Gauge
	Wait, Duration                                  prometheus.Observer
	PolicyLane
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
		Started: m.Started.WithLabelValues(name), Retries: m.Retries.WithLabelValues(name),
		Pushbacks: m.Pushbacks.WithLabelValues(name),
		Rejected:  map[string]prometheus.Counter{}, Dropped: map[string]prometheus.Counter{},
		Delivered:     map[string]prometheus.Counter{},
		DLStoreErrors: m.DLStoreErrors.WithLabelValues(name), DLLost: m.DLLost.WithLabelValues(name),
		Depth: m.Depth.WithLabelValues(name), Capacity: m.Capacity.WithLabelValues(name),
		Rate: m.Rate.WithLabelValues(name), Inflight: m.Inflight.WithLabelValues(name),
		Paused: m.Paused.WithLabelValues(name), StoreFull: m.StoreFull.WithLabelValues(name),
		Wait: m.wait.forLane(name, maxWait), Duration: m.dur.forLane(name, 0),
	}
	for _, r := range m.labels.Rejected {
		lm.Rejected[r] = m.Vecs.Rejected.WithLabelValues(name, r)
	}
	for _, r := range m.labels.Dropped {
		lm.Dropped[r] = m.Vecs.Dropped.WithLabelValues(name, r)
	}
	for _, o := range m.labels.Outcomes {
		lm.Delivered[o] = m.Delivered.WithLabelValues(name, o)
	}
	lm.PolicyLane = m.policyLane(name, m.labels.Shadow)
	lm.StoreFull.Set(0)
	return lm
}
