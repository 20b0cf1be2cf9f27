package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// span is the range of a value over the accepted jobs.
type span struct {
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

func (s *span) add(v float64) *span {
	if s == nil {
		return &span{v, v}
	}
	s.Min, s.Max = min(s.Min, v), max(s.Max, v)
	return s
}

// publishSummary aggregates the results of one publish run.
type publishSummary struct {
	Subject        string         `json:"subject"`
	Jobs           int            `json:"jobs"`
	Sent           int            `json:"sent"`
	Accepted       int            `json:"accepted"` // duplicates included
	Duplicates     int            `json:"duplicates"`
	Rejected       int            `json:"rejected"`
	RejectedBy     map[string]int `json:"rejected_by_reason"`
	RetryAfter     map[int]int    `json:"retry_after_seconds"` // value → how many replies carried it
	Position       *span          `json:"position,omitempty"`
	ETA            *span          `json:"eta_seconds,omitempty"`
	Paused         int            `json:"paused,omitempty"` // accepted while paused until resumed: no eta
	NoAnswer       int            `json:"no_answer"`        // sent (or not), never answered
	NoAnswerBy     map[string]int `json:"no_answer_by_error"`
	TargetRate     float64        `json:"target_rate_per_second"` // 0: as fast as possible
	SendRate       float64        `json:"achieved_rate_per_second"`
	WallSeconds    float64        `json:"wall_seconds"`
	NoReply        bool           `json:"no_reply,omitempty"`
	outcomeSummary                // with -wait
	Results        []jobResult    `json:"jobs_detail,omitempty"` // with -v
}

// summarize aggregates results (in index order) of a run that took wall.
func summarize(o publishOptions, results []jobResult, wall time.Duration) publishSummary {
	s := publishSummary{
		Subject: o.subject(), Jobs: len(results), TargetRate: o.Rate, NoReply: o.NoReply,
		RejectedBy: map[string]int{}, RetryAfter: map[int]int{}, NoAnswerBy: map[string]int{},
		WallSeconds: wall.Seconds(),
	}
	var first, last time.Duration = -1, 0
	for _, r := range results {
		if r.Sent {
			s.Sent++
			if first < 0 || r.SentAt < first {
				first = r.SentAt
			}
			last = max(last, r.SentAt)
		}
		s.add(r)
	}
	if s.Sent > 1 && last > first {
		s.SendRate = float64(s.Sent-1) / (last - first).Seconds()
	}
	if o.Wait {
		s.outcomeSummary = summarizeOutcomes(results)
	}
	if o.Verbose {
		s.Results = results
	}
	return s
}

// add counts one job's outcome.
func (s *publishSummary) add(r jobResult) {
	if r.RetryAfter > 0 {
		s.RetryAfter[r.RetryAfter]++
	}
	switch {
	case r.Status == "accepted":
		s.Accepted++
		if r.Duplicate {
			s.Duplicates++
		}
		if !r.Duplicate { // the daemon omits position 0 (starting now)
			s.Position = s.Position.add(float64(r.Position))
		}
		if r.ETA != nil {
			s.ETA = s.ETA.add(*r.ETA)
		}
		if r.Paused {
			s.Paused++
		}
	case r.Status == "rejected":
		s.Rejected++
		s.RejectedBy[r.Reason]++
	case r.Err != "":
		s.NoAnswer++
		s.NoAnswerBy[r.Err]++
	}
}

// writeSummary prints s as text (and per-job lines with -v) or as JSON.
func writeSummary(w io.Writer, o publishOptions, s publishSummary, results []jobResult) error {
	if o.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	if o.Verbose {
		if err := writeJobTable(w, results, o.Wait); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	return writeSummaryText(w, s)
}

// writeSummaryText prints the readable summary.
func writeSummaryText(w io.Writer, s publishSummary) error {
	target := "as fast as possible"
	if s.TargetRate > 0 {
		target = "target " + formatRate(s.TargetRate)
	}
	achieved := "n/a"
	if s.SendRate > 0 {
		achieved = formatRate(roundRate(s.SendRate))
	}
	verb := "published"
	if s.NoReply {
		verb = "published (no reply requested)"
	}
	lines := []string{fmt.Sprintf("%s %d of %d jobs to %s in %s (send rate %s, %s)",
		verb, s.Sent, s.Jobs, s.Subject, formatSeconds(time.Duration(s.WallSeconds*float64(time.Second))), achieved, target)}
	if s.NoReply {
		lines = append(lines, fmt.Sprintf("  failed to publish  %d  %s", s.NoAnswer, formatCounts(s.NoAnswerBy, "=")))
	} else {
		lines = append(lines,
			fmt.Sprintf("  accepted     %4d  %s", s.Accepted, acceptedDetail(s)),
			fmt.Sprintf("  duplicates   %4d", s.Duplicates),
			fmt.Sprintf("  rejected     %4d  %s", s.Rejected, formatCounts(s.RejectedBy, "=")),
			fmt.Sprintf("  retry-after        %s", formatRetryAfter(s.RetryAfter)),
			fmt.Sprintf("  no answer    %4d  %s", s.NoAnswer, formatCounts(s.NoAnswerBy, "=")))
	}
	if s.Wait {
		lines = append(lines, outcomeLines(s.outcomeSummary)...)
	}
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, strings.TrimRight(l, " ")); err != nil {
			return err
		}
	}
	return nil
}

// roundRate keeps a measured rate to about 4 significant digits: 3271/s,
// 49.88/s, not 3271.069/s.
func roundRate(r float64) float64 {
	if r <= 0 {
		return r
	}
	scale := math.Pow(10, 3-math.Floor(math.Log10(r)))
	return math.Round(r*scale) / scale
}

// acceptedDetail is the position and ETA range of accepted jobs.
func acceptedDetail(s publishSummary) string {
	var parts []string
	if s.Position != nil {
		parts = append(parts, fmt.Sprintf("positions %s..%s", formatNum(s.Position.Min), formatNum(s.Position.Max)))
	}
	if s.ETA != nil {
		parts = append(parts, fmt.Sprintf("eta %ss..%ss", formatNum(s.ETA.Min), formatNum(s.ETA.Max)))
	}
	if s.Paused > 0 {
		parts = append(parts, fmt.Sprintf("%d while paused (no eta)", s.Paused))
	}
	return strings.Join(parts, ", ")
}

// formatCounts prints a count map as "a=3 b=1", largest first, then by name.
func formatCounts(m map[string]int, sep string) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		return cmp.Or(cmp.Compare(m[b], m[a]), strings.Compare(a, b))
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+sep+strconv.Itoa(m[k]))
	}
	return strings.Join(parts, " ")
}

// formatRetryAfter prints distinct Retry-After values with counts: "1s×3 2s×1".
func formatRetryAfter(m map[int]int) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for _, v := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%ds×%d", v, m[v]))
	}
	return strings.Join(parts, " ")
}

// writeJobTable prints one line per job; with wait, its outcome and
// latency too.
func writeJobTable(w io.Writer, results []jobResult, wait bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "JOB\tKEY\tSTATUS\tREASON\tRETRY-AFTER\tPOSITION\tETA"
	if wait {
		head += "\tJOB ID\tOUTCOME\tLATENCY"
	}
	fmt.Fprintln(tw, head)
	for _, r := range results {
		status, reason := r.Status, r.Reason
		if status == "" {
			status, reason = "no answer", r.Err
		} else if r.Duplicate {
			status = "accepted (duplicate)"
		}
		position := "-"
		if r.Status == "accepted" && !r.Duplicate {
			position = strconv.Itoa(r.Position)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s", r.Index, dash(r.Key), status, dash(reason),
			dashInt(r.RetryAfter, "s"), position, etaText(r.ETA, r.Paused))
		if wait {
			fmt.Fprintf(tw, "\t%s\t%s\t%s", dash(r.JobID), outcomeText(r), etaText(r.Latency, false))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func dashInt(v int, unit string) string {
	if v == 0 {
		return "-"
	}
	return strconv.Itoa(v) + unit
}

func etaText(eta *float64, paused bool) string {
	if paused {
		return "paused"
	}
	if eta == nil {
		return "-"
	}
	return formatNum(*eta) + "s"
}
