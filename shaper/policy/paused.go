package policy

import "time"

// Paused is a pause set by an operator (the admin API's pause and resume):
// while On it holds every start. A pause with a zero Until lasts until it
// is turned off; one with an Until ends by itself there, and the lane's
// schedule restarts from that end (no burst for the time paused), as it
// restarts from the moment of a resume. The lane exports an effective rate
// of 0 while it holds. Its zero value is not paused. Not safe for
// concurrent use (the lane's lock guards it).
type Paused struct {
	On bool
	// Until is when a timed pause ends by itself; zero = until turned off.
	Until time.Time
	floor time.Time // end of the last timed pause seen to end: the schedule's floor
}

// Pause pauses until until (zero: until Resume) and reports whether that
// changed anything. An until not after now is no pause at all.
func (p *Paused) Pause(now, until time.Time) bool {
	if !until.IsZero() && !until.After(now) {
		return p.Resume()
	}
	if p.On && p.Until.Equal(until) {
		return false
	}
	p.On, p.Until = true, until
	return true
}

// Resume ends the pause and reports whether there was one.
func (p *Paused) Resume() bool {
	was := p.On
	p.On, p.Until = false, time.Time{}
	return was
}

// Holding reports whether the pause holds starts at now.
func (p *Paused) Holding(now time.Time) bool {
	return p.On && (p.Until.IsZero() || now.Before(p.Until))
}

// Indefinite reports whether a pause without an end is on: no start is
// scheduled, so nothing about the next start can be predicted.
func (p *Paused) Indefinite() bool { return p.On && p.Until.IsZero() }

// Quiet reports whether no pause is on and the lane started after the
// last timed one ended: Gate answers that end, which the schedule is past.
func (p *Paused) Quiet(last time.Time) bool { return !p.On && !p.floor.After(last) }

// Gate holds every start while a pause without an end is on, and answers
// NotBefore the end of a timed one; at or after that end the pause is
// over (On turns false) and the end stays the schedule's floor.
func (p *Paused) Gate(now time.Time, _ int) Gate {
	switch {
	case !p.On:
	case p.Until.IsZero():
		return Gate{Held: true}
	case now.Before(p.Until):
		return Gate{NotBefore: p.Until}
	default:
		p.floor, p.On, p.Until = p.Until, false, time.Time{}
	}
	return Gate{NotBefore: p.floor}
}

// Mark is MarkPaused and MarkIdle while the pause is on (as its last Gate
// left it).
func (p *Paused) Mark() Mark {
	if p.On {
		return MarkPaused | MarkIdle
	}
	return 0
}

// Forecast waits out a timed pause that runs at at; ok is false while a
// pause without an end is on.
func (p *Paused) Forecast(at time.Time, span time.Duration) (time.Time, bool) {
	if p.Indefinite() {
		return time.Time{}, false
	}
	if p.On && at.Before(p.Until) {
		at = p.Until
	}
	return at.Add(span), true
}

// Describe shows whether the pause holds starts at now, and until when.
func (p *Paused) Describe(now time.Time, v *View) {
	v.Paused, v.PausedUntil = p.Holding(now), p.Until
}
