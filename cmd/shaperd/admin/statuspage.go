package admin

import (
	"bytes"
	"crypto/sha256"
	_ "embed" // the status page
	"encoding/base64"
	"fmt"
	"html/template"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shaperd/shaper/config"
	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/policy"
)

// statusHTML is the admin listener's GET /: one row per downstream (queue
// fill, achieved against configured rate, in flight, refusals by reason,
// stored dead letters with a replay control, paused or pushback) and charts
// of depth and rate over the last minutes. The replay control POSTs to
// /v1/downstreams/{name}/dead/replay from the script (same origin, the
// page's credentials); the CSP allows no form submission.
// It is plain HTML with an inline style and script and no external assets.
// The server renders the rows once (html/template escapes every name); the
// script then polls GET /v1/downstreams and GET /v1/history every 2 s and
// redraws them, building elements with textContent, never from markup.
// Each name cell has a "latest jobs" expander: only while one is open does
// the script ask GET /v1/downstreams/{name}/jobs (on opening, then once a
// poll) and draw its jobs in a row below the downstream's.
//
//go:embed status.html
var statusHTML string

// statusTmpl is statusHTML parsed; statusTmplErr is checked by a test and,
// should it ever be set, turns the page into a 500 rather than a panic.
var statusTmpl, statusTmplErr = template.New("status").Parse(statusHTML)

// statusPageCSP allows exactly the page's own inline style and script (by
// hash) and requests to this origin: nothing else loads or runs. The hashes
// are taken from the rendered page, since html/template drops the script's
// comments.
func statusPageCSP(page string) string {
	return "default-src 'none'; connect-src 'self'; img-src 'self'; " +
		"style-src " + inlineHashes(page, "style") + "; script-src " + inlineHashes(page, "script") +
		"; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

func (h *handlers) serveStatusPage(w http.ResponseWriter, r *http.Request) {
	if statusTmplErr != nil {
		http.Error(w, "status page: "+statusTmplErr.Error(), http.StatusInternalServerError)
		return
	}
	var lanes []shaper.LaneStatus
	if ds := h.Downstreams(); ds != nil {
		lanes = ds.Lanes()
	}
	var buf bytes.Buffer
	if err := statusTmpl.Execute(&buf, statusRows(downstreamRows(r.Context(), time.Now(), lanes, h.DeadStats))); err != nil {
		http.Error(w, "status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("Content-Security-Policy", statusPageCSP(buf.String()))
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	_, _ = w.Write(buf.Bytes()) // the client may have gone
}

// statusRow is one downstream as the page first shows it, before the
// script has history to add rates and charts.
type statusRow struct {
	downstreamRow
	Class, State, Note string // as the script's classify, without history
	DeadText           string // as the script's deadText
	BarClass, BarWidth string
	FillPct            int
	QueueText          string // jobs per level and delayed, as the script's queueText; "" if none
	RateText           string
	EffectiveText      string // the effective rate, in the unit of RateText
	QuotaText          string // the advertised quota, as the script's fmtQuota; "–" if none
	LatencyText        string // the mean try duration since start, as the script's fmtLatency
	BreakerClass       string // chip class: ok, half (probing), open (red)
	BreakerText        string
	BreakerNote        string
	MaintText          string // the next maintenance window, as the script's runtimeLines
	OverrideText       string // what the admin API overrides, as the script's runtimeLines
	BatchText          string // the batch and its mean jobs per call, as the script's batchText; "" without one
	Refused            []statusChip
	Succeeded          uint64
	Failed             uint64 // delivered failed + dead_lettered, as the script's failures
	DeadLettered       uint64
}

type statusChip struct{ Class, Text string }

func statusRows(lanes []downstreamRow) []statusRow {
	rows := make([]statusRow, 0, len(lanes))
	for _, dr := range lanes {
		st := dr.LaneStatus
		fill := 0.0
		if st.Capacity > 0 {
			fill = min(1, float64(st.Depth)/float64(st.Capacity))
		}
		r := statusRow{
			downstreamRow: dr, FillPct: int(fill*100 + 0.5), BarWidth: strconv.FormatFloat(fill*150, 'f', 1, 64),
			BarClass: "low", RateText: config.Rate(st.Rate).String(), Succeeded: st.Delivered[shaper.OutcomeSuccess],
			DeadText: deadText(dr.DeadLetters), Failed: failures(st),
			DeadLettered: st.Delivered[shaper.OutcomeDeadLettered],
		}
		switch {
		case fill >= 0.9:
			r.BarClass = "full"
		case fill >= 0.5:
			r.BarClass = "mid"
		}
		r.Class, r.State, r.Note = classify(st, fill)
		r.QueueText = queueText(st)
		r.EffectiveText = sameUnit(st.EffectiveRate, st.Rate)
		r.QuotaText = quotaText(st.AdvertisedQuota)
		r.LatencyText = latencyText(st.Tries, st.TrySeconds)
		r.BreakerClass, r.BreakerText, r.BreakerNote = breakerChip(st)
		r.MaintText, r.OverrideText = runtimeTexts(st)
		r.BatchText = batchText(st.Batch)
		for _, m := range []struct {
			counts map[shaper.Reason]uint64
			class  string
		}{{st.Rejected, "chip"}, {st.Dropped, "chip drop"}} {
			for _, reason := range slices.Sorted(maps.Keys(m.counts)) {
				if n := m.counts[reason]; n > 0 {
					r.Refused = append(r.Refused, statusChip{m.class, fmt.Sprintf("%s %d", reason, n)})
				}
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// classify is the script's classify without the recent refusal and
// failure rates: a downstream whose deliveries all failed is red ("failing")
// whatever its depth.
func classify(st shaper.LaneStatus, fill float64) (class, state, note string) {
	if c, s, n, ok := held(st); ok {
		return c, s, n
	}
	switch {
	case failures(st) > 0 && st.Delivered[shaper.OutcomeSuccess] == 0:
		return "failing", "failing", fmt.Sprintf("%d deliveries failed, none succeeded", failures(st))
	case st.PushbackUntil != nil:
		return "paused", "pushback", "backend asked to wait until " + st.PushbackUntil.Format("15:04:05")
	case fill >= 0.9:
		return "shedding", "queue full", "the next burst is refused"
	case st.Depth > 0:
		return "shaping", "shaping", fmt.Sprintf("holding %d jobs back", st.Depth)
	case st.Inflight > 0:
		return "calm", "flowing", "under its rate"
	}
	return "calm", "idle", "nothing queued"
}

// held is the state of a lane that starts nothing: removing, paused, or
// held by its breaker.
func held(st shaper.LaneStatus) (class, state, note string, ok bool) {
	switch {
	case st.Removing:
		return "idle", "removing", "draining what it holds", true
	case st.Paused && st.PausedUntil != nil:
		return "paused", "paused", "by the admin API until " + st.PausedUntil.Local().Format("15:04:05") + "; jobs keep queueing", true
	case st.Paused:
		return "paused", "paused", "by the admin API; jobs keep queueing", true
	case st.Maintenance != nil && st.Maintenance.Active:
		return "paused", "maintenance", "window until " + st.Maintenance.End.Local().Format("15:04:05") + "; jobs keep queueing", true
	case st.Breaker == policy.BreakerOpen:
		note := "downstream failing; jobs held"
		if st.BreakerUntil != nil {
			note += " until a probe at " + st.BreakerUntil.Format("15:04:05")
		}
		return "breaker", "breaker open", note, true
	case st.Breaker == policy.BreakerHalfOpen:
		return "breaker", "probing", "one probe job decides whether the breaker closes", true
	}
	return "", "", "", false
}

// breakerChip is the breaker cell: its chip class and text, and a note.
func breakerChip(st shaper.LaneStatus) (class, text, note string) {
	switch st.Breaker {
	case policy.BreakerOpen:
		if st.BreakerUntil != nil {
			note = "probe at " + st.BreakerUntil.Format("15:04:05")
		}
		return "chip open", string(st.Breaker), note
	case policy.BreakerHalfOpen:
		return "chip half", string(st.Breaker), ""
	}
	return "chip ok", string(policy.BreakerClosed), ""
}

// sameUnit formats rate in the unit the page shows ref in (the script's
// unit and fmtRate: /s from 1/s up, else /m, else /h).
func sameUnit(rate, ref float64) string {
	suffix, mult := "/s", 1.0
	switch {
	case ref >= 1:
	case ref*60 >= 1:
		suffix, mult = "/m", 60
	default:
		suffix, mult = "/h", 3600
	}
	return strconv.FormatFloat(math.Round(rate*mult*100)/100, 'f', -1, 64) + suffix
}

// inlineHashes returns the CSP source list of the sha256 hashes of every
// <tag>…</tag> body in page ('none' if there is none).
func inlineHashes(page, tag string) string {
	open, end := "<"+tag+">", "</"+tag+">"
	var srcs []string
	for rest := page; ; {
		_, after, ok := strings.Cut(rest, open)
		if !ok {
			break
		}
		body, tail, ok := strings.Cut(after, end)
		if !ok {
			break
		}
		sum := sha256.Sum256([]byte(body))
		srcs = append(srcs, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
		rest = tail
	}
	if len(srcs) == 0 {
		return "'none'"
	}
	return strings.Join(srcs, " ")
}

// quotaText is an advertised quota as the page shows it: "20 per 1s (3
// left)", or "–" when none was advertised.
func quotaText(q *shaper.AdvertisedQuota) string {
	if q == nil {
		return "–"
	}
	s := fmt.Sprintf("%d per %s", q.Limit, time.Duration(q.WindowSeconds*float64(time.Second)))
	if q.Remaining != nil {
		s += fmt.Sprintf(" (%d left)", *q.Remaining)
	}
	return s
}

// latencyText is the mean try duration since start: "42 ms", "1.5 s", or
// "–" before the first answer.
func latencyText(tries uint64, seconds float64) string {
	if tries == 0 || seconds <= 0 {
		return "–"
	}
	mean := seconds / float64(tries)
	if mean < 1 {
		return fmt.Sprintf("%d ms", int(math.Round(mean*1000)))
	}
	return strconv.FormatFloat(math.Round(mean*100)/100, 'f', -1, 64) + " s"
}

// runtimeTexts are the name cell's lines for the next maintenance window
// and what the admin API overrides, each overridden value marked ✎; ""
// for none.
func runtimeTexts(st shaper.LaneStatus) (maint, override string) {
	if m := st.Maintenance; m != nil && !m.Active {
		maint = "maintenance next " + m.Start.Local().Format("Mon 15:04:05") + "–" + m.End.Local().Format("15:04:05")
	}
	if o := st.Override; o != nil {
		var parts []string
		if o.Rate != 0 {
			parts = append(parts, "rate "+sameUnit(o.Rate, o.Rate)+" ✎")
		}
		if o.Concurrency != 0 {
			parts = append(parts, fmt.Sprintf("concurrency %d ✎", o.Concurrency))
		}
		if o.Capacity != 0 {
			parts = append(parts, fmt.Sprintf("capacity %d ✎", o.Capacity))
		}
		override = "override: " + strings.Join(parts, " · ")
	}
	return maint, override
}

// queueText says where the queued jobs wait, as the script's queueText:
// "by level 2 · 0 · 5; 3 delayed" (most urgent level first), each part only
// when there is something to say.
func queueText(st shaper.LaneStatus) string {
	var parts []string
	if len(st.Levels) > 1 {
		by := make([]string, len(st.Levels))
		for i, n := range st.Levels {
			by[i] = strconv.Itoa(n)
		}
		parts = append(parts, "by level "+strings.Join(by, " · "))
	}
	if st.Delayed != nil && *st.Delayed > 0 {
		parts = append(parts, strconv.Itoa(*st.Delayed)+" delayed")
	}
	return strings.Join(parts, "; ")
}

// batchText is the script's batchText.
func batchText(b *shaper.BatchStatus) string {
	if b == nil {
		return ""
	}
	s := fmt.Sprintf("calls of ≤%d (%s)", b.MaxJobs, b.Encoding)
	if b.Calls > 0 {
		s += fmt.Sprintf(" · mean %.1f jobs", float64(b.Jobs)/float64(b.Calls))
	}
	return s
}
