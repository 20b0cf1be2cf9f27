package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// batchJobsBuckets are shaper_batch_jobs' bounds: from a call of one job
// to batch.max_jobs' largest value.
var batchJobsBuckets = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000}

// BatchVecs are the series of the calls of downstreams with a batch
// (several jobs per call), by downstream.
type BatchVecs struct {
	BatchJobs *prometheus.HistogramVec
	Batches   *prometheus.CounterVec // outcome
}

func newBatchVecs(f promauto.Factory) BatchVecs {
	return BatchVecs{
		BatchJobs: f.NewHistogramVec(prometheus.HistogramOpts{Name: "shaper_batch_jobs",
			Help:    "Jobs carried by one call of a downstream with a batch (batch.max_jobs).",
			Buckets: batchJobsBuckets}, []string{"downstream"}),
		Batches: f.NewCounterVec(prometheus.CounterOpts{Name: "shaper_batches_total",
			Help: "Calls of a downstream with a batch, by outcome: success (every job), partial (the answer named failed jobs), pushback (429/503 with a wait), retry (5xx, timeout, no connection: every job retried), failed (other 4xx), cancelled (at shutdown)."},
			[]string{"downstream", "outcome"}),
	}
}

// CallStarted observes a call of the lane carrying jobs jobs. Its series
// appear with the lane's first call: a downstream without a batch has
// none.
func (l *Lane) CallStarted(jobs int) {
	l.batch.BatchJobs.WithLabelValues(l.name).Observe(float64(jobs))
}

// CallEnded counts a call of the lane that ended in outcome.
func (l *Lane) CallEnded(outcome string) {
	l.batch.Batches.WithLabelValues(l.name, outcome).Inc()
}
