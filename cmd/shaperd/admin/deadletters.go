package admin

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/shaperd/shaper/cmd/shaperd/admin/api"
	"github.com/shaperd/shaper/shaper"
)

// DeadStats reports a downstream's stored dead letters: how many, and when
// the oldest of them was stored (ignored when stored is 0). ok is false when
// the downstream has no store (no JetStream) or the store could not answer;
// the admin API then leaves the downstream's "dead_letters" out and the
// status page shows "–". It is called once per downstream for every GET
// /v1/downstreams and status page, concurrently, with the request's ctx: it
// should answer from memory or a call bounded by ctx.
type DeadStats func(ctx context.Context, downstream string) (stored int, oldest time.Time, ok bool)

// DeadLetterSummary is a downstream's "dead_letters" in GET /v1/downstreams.
type DeadLetterSummary = api.DeadLetterSummary

// downstreamRow is one entry of GET /v1/downstreams: the lane's status and,
// when the daemon has a store for it, its dead letters.
type downstreamRow struct {
	shaper.LaneStatus
	DeadLetters *DeadLetterSummary `json:"dead_letters,omitempty"`
}

// downstreamRows adds each lane's dead-letter summary (none if stats is nil
// or does not know the lane) as of now.
func downstreamRows(ctx context.Context, now time.Time, lanes []shaper.LaneStatus, stats DeadStats) []downstreamRow {
	rows := make([]downstreamRow, 0, len(lanes))
	for _, st := range lanes {
		rows = append(rows, downstreamRow{LaneStatus: st, DeadLetters: deadSummary(ctx, now, st.Name, stats)})
	}
	return rows
}

func deadSummary(ctx context.Context, now time.Time, name string, stats DeadStats) *DeadLetterSummary {
	if stats == nil {
		return nil
	}
	stored, oldest, ok := stats(ctx, name)
	if !ok {
		return nil
	}
	s := &DeadLetterSummary{Stored: max(stored, 0)}
	if s.Stored > 0 && !oldest.IsZero() {
		age := math.Round(max(now.Sub(oldest).Seconds(), 0)*1000) / 1000 // a clock step back is not a negative age
		s.OldestSeconds = &age
	}
	return s
}

// deadText is the status page's dead-letters cell before the script runs,
// as the script's deadText writes it: "–" without a store, "0 stored",
// "5 stored · oldest 5m 12s".
func deadText(s *DeadLetterSummary) string {
	switch {
	case s == nil:
		return "–"
	case s.OldestSeconds == nil:
		return fmt.Sprintf("%d stored", s.Stored)
	}
	return fmt.Sprintf("%d stored · oldest %s", s.Stored, fmtAge(*s.OldestSeconds))
}

// fmtAge prints an age in seconds in its two largest units: 42s, 5m 12s,
// 3h 20m, 2d 4h. The script's fmtAge is the same.
func fmtAge(seconds float64) string {
	s := int64(seconds)
	two := func(a int64, ua string, b int64, ub string) string {
		if b == 0 {
			return fmt.Sprintf("%d%s", a, ua)
		}
		return fmt.Sprintf("%d%s %d%s", a, ua, b, ub)
	}
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return two(s/60, "m", s%60, "s")
	case s < 86400:
		return two(s/3600, "h", s%3600/60, "m")
	}
	return two(s/86400, "d", s%86400/3600, "h")
}
