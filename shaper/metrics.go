package shaper

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shaperd/shaper/shaper/metrics"
	"github.com/shaperd/shaper/shaper/outcome"
	"github.com/shaperd/shaper/shaper/settings"
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

// NewMetrics creates the shaper's collectors (metrics.New) with its label
// sets: the rejection, drop and shadow reasons, the outcomes, and "_unknown"
// for jobs naming no lane. A nil reg leaves them unregistered.
func NewMetrics(reg prometheus.Registerer) *metrics.Metrics {
	return metrics.New(reg, metrics.Labels{
		Unknown: settings.Unknown, Rejected: labels(rejectReasons), BadRequest: string(ReasonBadRequest),
		Dropped: labels(dropReasons), IntakeDrop: string(ReasonSlowConsumer),
		Outcomes: labels(outcomes), Success: string(OutcomeSuccess), Shadow: labels(shadowReasons),
		Ended: labels([]outcome.State{outcome.Succeeded, outcome.Failed, outcome.Expired, outcome.Dropped}),
	})
}

// labels are the label values of vs.
func labels[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}
