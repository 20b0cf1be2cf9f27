package api

// History is the body of GET /v1/history: per downstream (sorted by name),
// parallel arrays with one entry per sample, oldest first:
//
//	{"interval_seconds":2,"max_samples":300,"downstreams":[{"name":"printer",
//	  "time_unix_ms":[1764487402000,1764487404000],"depth":[9,10],"capacity":[10,10],
//	  "inflight":[1,1],"rate":[2,2],"achieved_rate":[2,2],"rejected_rate":[1.5,3],
//	  "dropped_rate":[0,0],"success_rate":[2,2],"failure_rate":[0,0],
//	  "retry_rate":[0,0],"paused":[false,false]}]}
//
// A downstream's first sample comes one interval after it is first seen
// (its counters need a baseline); a removed downstream's history goes with it.
type History struct {
	IntervalSeconds float64           `json:"interval_seconds"` // time between samples
	MaxSamples      int               `json:"max_samples"`      // per downstream; older ones are dropped
	Downstreams     []DownstreamTrend `json:"downstreams"`
}

// DownstreamTrend is one downstream's samples. Rates are per second over
// the interval that ended at the sample, of the counters GET
// /v1/downstreams shows: AchievedRate is the rate of "started" (tries
// started, retries included), RejectedRate and DroppedRate of the sums of
// "rejected" and "dropped" over all reasons, SuccessRate of
// "delivered"."success", FailureRate of "delivered"."failed" +
// "delivered"."dead_lettered", RetryRate of "retries".
type DownstreamTrend struct {
	Name         string    `json:"name"`
	TimeUnixMs   []int64   `json:"time_unix_ms"`
	Depth        []int     `json:"depth"`
	Capacity     []int     `json:"capacity"`
	Inflight     []int     `json:"inflight"`
	Rate         []float64 `json:"rate"` // configured
	AchievedRate []float64 `json:"achieved_rate"`
	RejectedRate []float64 `json:"rejected_rate"`
	DroppedRate  []float64 `json:"dropped_rate"`
	SuccessRate  []float64 `json:"success_rate"`
	FailureRate  []float64 `json:"failure_rate"`
	RetryRate    []float64 `json:"retry_rate"`
	// LatencySeconds is the mean duration of the tries answered in each
	// sample's span (0: none answered).
	LatencySeconds []float64 `json:"latency_seconds"`
	Paused         []bool    `json:"paused"` // by the admin API or a pushback
}
