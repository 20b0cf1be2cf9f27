package policy

import (
	"slices"
	"time"
)

// MaxWindowLength bounds a maintenance window's length.
const MaxWindowLength = 7 * 24 * time.Hour

// Window is a recurring maintenance window: on each of Days, from
// Hour:Minute:Second in Loc (nil = UTC), for Length. Days is indexed by time.Weekday; a window that
// crosses midnight belongs to the day it starts on. A start that a
// daylight-saving change skips is moved as time.Date moves it.
type Window struct {
	Days                 [7]bool
	Hour, Minute, Second int
	Length               time.Duration // 0 < Length <= MaxWindowLength
	Loc                  *time.Location
}

// Span is one occurrence of maintenance: [Start, End). Overlapping or
// touching windows make one span.
type Span struct{ Start, End time.Time }

// Maintenance holds a lane's starts inside recurring maintenance windows:
// no start inside a window, and the schedule restarts from the window's end
// (no burst for the time held). Intake is not its business. The zero value
// has no windows. Not safe for concurrent use (the lane's lock guards it).
type Maintenance struct {
	windows []Window
	floor   time.Time // end of the last window seen: the schedule's floor
	active  bool      // the last Gate was inside a window
	// spans caches the merged occurrences that meet [from, to].
	spans    []Span
	from, to time.Time
}

// Configure sets the windows (nil: none), keeping the floor.
func (m *Maintenance) Configure(ws []Window) {
	m.windows = slices.Clone(ws)
	m.spans, m.from, m.to = nil, time.Time{}, time.Time{}
}

// Gate answers NotBefore the end of the window now is in; outside one, the
// end of the last window seen (a floor in the past).
func (m *Maintenance) Gate(now time.Time, _ int) Gate {
	s, ok := m.Current(now)
	if ok {
		m.floor = s.End
	}
	m.active = ok
	return Gate{NotBefore: m.floor}
}

// Quiet reports whether the lane has no windows, the last Gate was not
// in one, and the lane started after the last one ended: Gate answers
// that end, which the schedule is past.
func (m *Maintenance) Quiet(last time.Time) bool {
	return len(m.windows) == 0 && !m.active && !m.floor.After(last)
}

// Mark is MarkMaintenance and MarkIdle while the last Gate was inside a
// window.
func (m *Maintenance) Mark() Mark {
	if m.active {
		return MarkMaintenance | MarkIdle
	}
	return 0
}

// Describe shows the window now is in, or the next one.
func (m *Maintenance) Describe(now time.Time, v *View) { v.Window, v.HasWindow = m.Next(now) }

// Current is the span now is in, if any.
func (m *Maintenance) Current(now time.Time) (Span, bool) {
	for _, s := range m.between(now, now.Add(time.Nanosecond)) {
		if !now.Before(s.Start) && now.Before(s.End) {
			return s, true
		}
	}
	return Span{}, false
}

// Next is the span now is in, or else the next one to begin (within
// eight days); ok is false without windows.
func (m *Maintenance) Next(now time.Time) (Span, bool) {
	for _, s := range m.between(now, now.Add(8*24*time.Hour)) {
		if now.Before(s.End) {
			return s, true
		}
	}
	return Span{}, false
}

// NextChange is when the lane next enters or leaves maintenance after
// now; zero without windows.
func (m *Maintenance) NextChange(now time.Time) time.Time {
	if len(m.windows) == 0 { // every reschedule asks: answer at once
		return time.Time{}
	}
	s, ok := m.Next(now)
	switch {
	case !ok:
		return time.Time{}
	case now.Before(s.Start):
		return s.Start
	}
	return s.End
}

// Shift is when d of time outside maintenance has passed from t: the start
// of work that takes d from t, with every window on the way held over.
// It gives up after a thousand windows and adds d past the last.
func (m *Maintenance) Shift(t time.Time, d time.Duration) time.Time {
	if len(m.windows) == 0 {
		return t.Add(d)
	}
	for range 1000 {
		s, ok := m.Next(t)
		switch {
		case !ok:
			return t.Add(d)
		case !t.Before(s.Start): // inside: wait it out
			t = s.End
		case t.Add(d).Before(s.Start):
			return t.Add(d)
		default:
			d -= s.Start.Sub(t)
			t = s.End
		}
	}
	return t.Add(d)
}

// Forecast is Shift: a start span ahead of at is held over every window
// on the way.
func (m *Maintenance) Forecast(at time.Time, span time.Duration) (time.Time, bool) {
	return m.Shift(at, span), true
}

// between returns the merged spans that meet [from, to), sorted.
func (m *Maintenance) between(from, to time.Time) []Span {
	if len(m.windows) == 0 {
		return nil
	}
	if m.spans == nil || from.Before(m.from) || to.After(m.to) {
		// Cache a day beyond what is asked, so that the next calls find it.
		m.from, m.to = from, later(to, from.Add(9*24*time.Hour))
		m.spans = spansOf(m.windows, m.from, m.to)
	}
	return m.spans
}

// spansOf lists the occurrences of ws that meet [from, to), merged and sorted.
func spansOf(ws []Window, from, to time.Time) []Span {
	var raw []Span
	for _, w := range ws {
		loc := w.Loc
		if loc == nil {
			loc = time.UTC
		}
		// Every start that may reach from: a day before the longest window.
		first := from.Add(-w.Length - 24*time.Hour).In(loc)
		y, mo, d := first.Date()
		for i := 0; ; i++ {
			start := time.Date(y, mo, d+i, w.Hour, w.Minute, w.Second, 0, loc)
			if !start.Before(to.Add(24 * time.Hour)) {
				break
			}
			day := time.Date(y, mo, d+i, 12, 0, 0, 0, loc).Weekday()
			if w.Days[day] && start.Add(w.Length).After(from) && start.Before(to) {
				raw = append(raw, Span{start.UTC(), start.Add(w.Length).UTC()})
			}
		}
	}
	slices.SortFunc(raw, func(a, b Span) int { return a.Start.Compare(b.Start) })
	var out []Span
	for _, s := range raw {
		if n := len(out); n > 0 && !s.Start.After(out[n-1].End) {
			out[n-1].End = later(out[n-1].End, s.End)
			continue
		}
		out = append(out, s)
	}
	return out
}
