package policy

import "time"

// Pushback pauses a lane when the downstream asks it to wait: a PushedBack
// answer (429/503 with Retry-After) pauses it until now+RetryAfter, never
// shortening a pause already running. The advertised quota pauses it
// when the quota is used up, through Hold (Pushback is the lane's Holder).
// After a pause the schedule restarts from its end: no catch-up for the
// time paused. The zero value is not paused. Not safe for concurrent use
// (the lane's lock guards it).
type Pushback struct {
	until   time.Time // end of the latest pause; kept after it as the schedule's floor
	pausing bool      // a pause runs: not yet seen to end by Gate
}

// Finished pauses for a PushedBack answer, unless the delivery was
// cancelled at shutdown, and reports PushbackPaused until the end of the
// pause (the latest, however it was asked for).
func (p *Pushback) Finished(now time.Time, a Answer) Event {
	if a.Class != PushedBack || a.Cancelled {
		return Event{}
	}
	if until := now.Add(max(a.RetryAfter, 0)); until.After(p.until) {
		p.until = until
	}
	p.pausing = true
	return Event{Kind: PushbackPaused, At: p.until}
}

// Hold pauses until until, unless a pause already lasts that long or until
// is not after now; it reports whether it paused.
func (p *Pushback) Hold(now, until time.Time) bool {
	if !until.After(p.until) || !until.After(now) {
		return false
	}
	p.until, p.pausing = until, true
	return true
}

// Gate answers NotBefore the end of the latest pause; at or after it the
// pause is over (Pausing turns false).
func (p *Pushback) Gate(now time.Time, _ int) Gate {
	if p.pausing && !now.Before(p.until) {
		p.pausing = false
	}
	return Gate{NotBefore: p.until}
}

// Quiet reports whether no pause runs and the lane started after the
// last one ended: Gate answers that end, which the schedule is past.
func (p *Pushback) Quiet(last time.Time) bool { return !p.pausing && !p.until.After(last) }

// Mark is MarkPaused while a pause runs.
func (p *Pushback) Mark() Mark {
	if p.pausing {
		return MarkPaused
	}
	return 0
}

// Describe shows when the latest pause ends (or ended).
func (p *Pushback) Describe(_ time.Time, v *View) { v.PushbackUntil = p.until }

// Until is when the latest pause ends (or ended); zero = never paused.
func (p *Pushback) Until() time.Time { return p.until }

// Pausing reports whether a pause runs: set by a pause, cleared by the
// first Gate at or after its end.
func (p *Pushback) Pausing() bool { return p.pausing }
