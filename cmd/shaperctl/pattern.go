package main

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// simEpoch is where generated patterns (and seconds-offset CSV rows) start:
// on a minute, so fixed windows line up the way the boundary case needs.
var simEpoch = time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)

// maxEvents bounds a simulation, to keep it to seconds and memory to ~100 MB.
const maxEvents = 1_000_000

// offeredFactor is how far steady and bursty exceed the limit on average.
const offeredFactor = 1.5

// defaultKey is the admission key of generated events and key-less CSV rows.
const defaultKey = "k"

// event is one offered request.
type event struct {
	At  time.Time
	Key string
}

// patternSpec is what a generated pattern depends on.
type patternSpec struct {
	Limit    int
	Window   time.Duration
	Duration time.Duration
	Seed     uint64
}

// steadyPattern offers evenly spaced requests at offeredFactor × the limit.
func steadyPattern(p patternSpec) ([]event, error) {
	rate := offeredFactor * float64(p.Limit) / p.Window.Seconds()
	n := int(rate * p.Duration.Seconds())
	if n > maxEvents {
		return nil, tooMany(n)
	}
	events := make([]event, n)
	for k := range events {
		events[k] = event{scheduleAt(simEpoch, k, rate), defaultKey}
	}
	return events, nil
}

// burstyPattern offers bursts of Limit/2 requests, each spread over
// Window/60 (1 s of a 1 m window), starting at exponentially distributed
// gaps averaging Window/3: on average offeredFactor × the limit.
func burstyPattern(p patternSpec) ([]event, error) {
	rng := rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15))
	size := max(1, p.Limit/2)
	spread := p.Window / 60
	meanGap := p.Window.Seconds() / 3
	var events []event
	for at := time.Duration(rng.ExpFloat64() * meanGap * float64(time.Second)); at < p.Duration; {
		for i := range size {
			events = append(events, event{simEpoch.Add(at + spread*time.Duration(i)/time.Duration(size)), defaultKey})
		}
		if len(events) > maxEvents {
			return nil, tooMany(len(events))
		}
		at += time.Duration(rng.ExpFloat64() * meanGap * float64(time.Second))
	}
	slices.SortStableFunc(events, func(a, b event) int { return a.At.Compare(b.At) })
	return events, nil
}

// boundaryPattern is the fixed window's worst case: nothing until one slot
// (Window/60) before a window ends, then Limit requests spread over that
// slot and Limit more over the slot after the boundary. For 100/min: 100 at
// 12:00:59, 100 at 12:01:00–12:01:01.
func boundaryPattern(p patternSpec) ([]event, error) {
	if 2*p.Limit > maxEvents {
		return nil, tooMany(2 * p.Limit)
	}
	slot := p.Window / 60
	boundary := simEpoch.Add(p.Window)
	events := make([]event, 0, 2*p.Limit)
	for _, from := range []time.Time{boundary.Add(-slot), boundary} {
		for i := range p.Limit {
			events = append(events, event{from.Add(slot * time.Duration(i) / time.Duration(p.Limit)), defaultKey})
		}
	}
	return events, nil
}

func tooMany(n int) error {
	return fmt.Errorf("the pattern would offer %d requests, more than %d; lower -duration or -limit", n, maxEvents)
}

// readCSVPattern reads one request per row: a timestamp (RFC 3339, or
// seconds since the start as a float) and an optional key. A first row
// whose timestamp does not parse is taken as a header; # starts a comment.
func readCSVPattern(r io.Reader) ([]event, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	var events []event
	for row := 0; ; row++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		at, ok := parseTimestamp(rec[0])
		if !ok {
			if row == 0 {
				continue // a header
			}
			return nil, fmt.Errorf("line %d: timestamp %q is neither RFC 3339 (2024-01-01T12:00:59.5Z) nor seconds (59.5)", line, rec[0])
		}
		key := defaultKey
		if len(rec) > 1 && strings.TrimSpace(rec[1]) != "" {
			key = strings.TrimSpace(rec[1])
		}
		if len(events) == maxEvents {
			return nil, fmt.Errorf("more than %d rows; simulate a shorter slice", maxEvents)
		}
		events = append(events, event{at, key})
	}
	if len(events) == 0 {
		return nil, errors.New("no rows; write one timestamp per line, optionally followed by ,key")
	}
	slices.SortStableFunc(events, func(a, b event) int { return a.At.Compare(b.At) })
	return events, nil
}

// parseTimestamp reads seconds since simEpoch or an RFC 3339 time.
func parseTimestamp(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil && f >= 0 && f < 1e9 {
		return simEpoch.Add(time.Duration(f * float64(time.Second))), true
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// maxInWindow is the most times in any window [s, s+w); times are sorted.
func maxInWindow(times []time.Time, w time.Duration) int {
	best, i := 0, 0
	for j := range times {
		for times[j].Sub(times[i]) >= w {
			i++
		}
		best = max(best, j-i+1)
	}
	return best
}
