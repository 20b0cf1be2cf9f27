package daemon

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// daemonMetrics are the daemon's own series: NATS connection state, intake
// health and config reloads. Job and queue series belong to shaper/metrics.
type daemonMetrics struct {
	natsConnected       prometheus.Gauge
	natsReconnects      prometheus.Counter
	reloads             prometheus.Counter
	reloadFailures      prometheus.Counter
	lastReloadSuccess   prometheus.Gauge
	dedupeEvicted       prometheus.Counter
	intakeReplyFailures prometheus.Counter
	duplicates          prometheus.Counter
	achievedRate        *prometheus.GaugeVec
	bulkRequests        *prometheus.CounterVec   // {downstream,status}
	bulkJobs            *prometheus.HistogramVec // {downstream}
}

func newDaemonMetrics(reg prometheus.Registerer) *daemonMetrics {
	f := promauto.With(reg)
	return &daemonMetrics{
		natsConnected: f.NewGauge(prometheus.GaugeOpts{
			Name: "shaper_nats_connected",
			Help: "1 while the daemon's NATS connection is up, else 0.",
		}),
		natsReconnects: f.NewCounter(prometheus.CounterOpts{
			Name: "shaper_nats_reconnects_total",
			Help: "NATS reconnections since start.",
		}),
		reloads: f.NewCounter(prometheus.CounterOpts{
			Name: "shaper_config_reloads_total",
			Help: "Config reloads attempted (SIGHUP), successful or not.",
		}),
		reloadFailures: f.NewCounter(prometheus.CounterOpts{
			Name: "shaper_config_reload_failures_total",
			Help: "Config reloads refused: invalid file, or a change that needs a restart.",
		}),
		lastReloadSuccess: f.NewGauge(prometheus.GaugeOpts{
			Name: "shaper_config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last config load that took effect (start-up counts).",
		}),
		dedupeEvicted: f.NewCounter(prometheus.CounterOpts{
			Name: "shaper_dedupe_evicted_total",
			Help: "Nats-Msg-Id entries forgotten before their dedupe window ended because the id table was full.",
		}),
		intakeReplyFailures: f.NewCounter(prometheus.CounterOpts{
			Name: "shaper_intake_reply_failures_total",
			Help: "Replies to producers that could not be published.",
		}),
		achievedRate: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shaper_drain_rate_achieved_per_second",
			Help: "Starts per second over the status page's last sampling interval (2 s): the achieved drain rate, beside shaper_drain_rate_per_second. For alerting prefer rate(shaper_jobs_started_total[5m]).",
		}, []string{"downstream"}),
		bulkRequests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "shaper_bulk_requests_total",
			Help: "Bulk intake requests answered, by status: accepted (every job), partial (some), rejected (none, or the request could not be read).",
		}, []string{"downstream", "status"}),
		bulkJobs: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "shaper_bulk_jobs",
			Help:    "Jobs per bulk intake request that could be read; each job is also counted in the single-job series.",
			Buckets: []float64{1, 10, 50, 100, 250, 500, 1000, 2500, 10000},
		}, []string{"downstream"}),
		duplicates: f.NewCounter(prometheus.CounterOpts{
			Name: "shaper_jobs_duplicate_total",
			Help: "Jobs whose Nats-Msg-Id was seen within ingress.dedupe_window: answered accepted with the first job's id, not queued again.",
		}),
	}
}
