package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/shaperd/shaper/shaper/producer"
)

// checkWait returns what is wrong with publish's -wait flags, or "".
func checkWait(o publishOptions) string {
	switch {
	case o.Wait && o.NoReply:
		return "-wait and -no-reply exclude each other: an outcome is sent to a job that asked for its reply"
	case o.WaitTimeout <= 0:
		return fmt.Sprintf("-wait-timeout must be positive, got %s", o.WaitTimeout)
	case o.StatusPrefix == "" || strings.ContainsAny(o.StatusPrefix, " *>"):
		return fmt.Sprintf("-status-prefix %q is not a subject prefix; e.g. %s", o.StatusPrefix, producer.DefaultStatusPrefix)
	}
	return ""
}

// jobOutcome is how an accepted job ended, with -wait.
type jobOutcome struct {
	Outcome    string   `json:"outcome,omitempty"`         // the final state
	StatusCode int      `json:"status_code,omitempty"`     // the downstream's HTTP status
	JobError   string   `json:"job_error,omitempty"`       // why it did not succeed
	Latency    *float64 `json:"latency_seconds,omitempty"` // accepted → ended
	NoOutcome  string   `json:"no_outcome,omitempty"`      // accepted, but no outcome: timeout, interrupted
}

// waitJob sends job i with SubmitAndWait, under -wait-timeout, and fills r
// with its answer and outcome.
func waitJob(ctx context.Context, c *producer.Client, o publishOptions, r *jobResult, payload []byte, opts []producer.Option) {
	wctx, cancel := context.WithTimeout(ctx, o.WaitTimeout)
	defer cancel()
	out, err := c.SubmitAndWait(wctx, o.Downstream, payload, opts...)
	if !out.Accepted.Accepted {
		record(r, out.Accepted, err)
		return
	}
	record(r, out.Accepted, nil)
	if err != nil {
		r.NoOutcome = "error: " + err.Error()
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			r.NoOutcome = "timeout"
		case errors.Is(err, context.Canceled):
			r.NoOutcome = "interrupted"
		}
		return
	}
	r.Outcome, r.StatusCode, r.JobError = string(out.State), out.StatusCode, out.Error
	r.Latency = new(out.Latency.Seconds())
}

// latency is the accepted → ended latency of the jobs that ended.
type latency struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// outcomeSummary aggregates the outcomes of a -wait run.
type outcomeSummary struct {
	Wait        bool           `json:"wait,omitempty"`
	Outcomes    map[string]int `json:"outcomes_by_state,omitempty"` // final state → jobs
	NoOutcome   int            `json:"no_outcome,omitempty"`        // accepted, no outcome in time
	NoOutcomeBy map[string]int `json:"no_outcome_by_error,omitempty"`
	Latency     *latency       `json:"latency_seconds,omitempty"`
}

// summarizeOutcomes aggregates the outcomes in results.
func summarizeOutcomes(results []jobResult) outcomeSummary {
	s := outcomeSummary{Wait: true, Outcomes: map[string]int{}, NoOutcomeBy: map[string]int{}}
	var lat []float64
	for _, r := range results {
		switch {
		case r.Outcome != "":
			s.Outcomes[r.Outcome]++
			if r.Latency != nil {
				lat = append(lat, *r.Latency)
			}
		case r.NoOutcome != "":
			s.NoOutcome++
			s.NoOutcomeBy[r.NoOutcome]++
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		s.Latency = &latency{P50: percentile(lat, 0.5), P99: percentile(lat, 0.99), Max: lat[len(lat)-1]}
	}
	return s
}

// percentile is the nearest-rank p-quantile of sorted, which is not empty.
func percentile(sorted []float64, p float64) float64 {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// outcomeLines are the summary's lines for a -wait run.
func outcomeLines(s outcomeSummary) []string {
	ended := 0
	for _, n := range s.Outcomes {
		ended += n
	}
	lat := "none ended"
	if s.Latency != nil {
		lat = fmt.Sprintf("p50 %s  p99 %s  max %s (accepted→ended, from send)",
			formatSeconds(secs(s.Latency.P50)), formatSeconds(secs(s.Latency.P99)), formatSeconds(secs(s.Latency.Max)))
	}
	return []string{
		fmt.Sprintf("  ended        %4d  %s", ended, formatCounts(s.Outcomes, "=")),
		fmt.Sprintf("  no outcome   %4d  %s", s.NoOutcome, formatCounts(s.NoOutcomeBy, "=")),
		"  latency            " + lat,
	}
}

func secs(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// outcomeText is a job's outcome for the -v table.
func outcomeText(r jobResult) string {
	switch {
	case r.Outcome != "" && r.StatusCode != 0:
		return fmt.Sprintf("%s (%d)", r.Outcome, r.StatusCode)
	case r.Outcome != "":
		return r.Outcome
	case r.NoOutcome != "":
		return "none: " + r.NoOutcome
	}
	return "-"
}
