package policy

import (
	"time"

	"github.com/shaperd/shaper/queue"
)

// Circuit breaker. A breaker that opens holds the lane's jobs instead of
// failing them:
//
//   - closed: every try's answer is booked. Failures consecutive failed
//     tries (a Failed answer: a 5xx, a timeout, a connection error; or an
//     Overloaded one that is not Limited: a 503 without Retry-After) open
//     it. A success, a pushback, a 429 (Limited) and a permanent refusal
//     are answers of a live downstream and reset the count: a downstream
//     that limits is the adaptive rate's business, not the breaker's.
//   - open: no job starts (Gate answers NotBefore the probe), so none uses
//     an attempt. Tries still in flight from before finish and are booked
//     for their jobs, not for the breaker.
//   - half_open: OpenFor after opening, exactly one job starts as the
//     probe (a real try), and no other starts while it is in flight (Gate
//     answers Held). An answer that is not a failure closes the breaker and
//     the schedule restarts from that moment, without a burst; a failure
//     reopens it for twice as long as the last time, at most MaxOpenFor.
//     A probe that failed asked the downstream on the breaker's behalf:
//     the lane puts its job back without using one of its attempts (on
//     BreakerProbeFailed), so an outage of any length exhausts no job.
//
// Tries cancelled at shutdown are not booked.
//
// The defaults are the config's when a downstream has no breaker key (the
// breaker is on); a zero BreakerSettings is off.
const (
	DefaultBreakerFailures   = 5
	DefaultBreakerOpenFor    = 5 * time.Second
	DefaultBreakerMaxOpenFor = 5 * time.Minute
)

// BreakerSettings configure a lane's circuit breaker. The zero value turns
// it off.
type BreakerSettings struct {
	// Failures is how many consecutive failed tries open the breaker; 0 =
	// off.
	Failures int
	// OpenFor is how long the breaker stays open before its first probe;
	// 0 = DefaultBreakerOpenFor.
	OpenFor time.Duration
	// MaxOpenFor caps the doubling after each failed probe; 0 =
	// DefaultBreakerMaxOpenFor. At least OpenFor.
	MaxOpenFor time.Duration
}

// BreakerState is a breaker's state as GET /v1/downstreams shows it.
type BreakerState string

// Breaker states. A lane without a breaker is always closed.
const (
	BreakerClosed   BreakerState = "closed"
	BreakerOpen     BreakerState = "open"
	BreakerHalfOpen BreakerState = "half_open" // the probe is due or in flight
)

// Breaker is a lane's circuit breaker (see the constants above). Each
// change of its state is an Event: BreakerTripped, BreakerProbeFailed and
// BreakerProbed from Finished (At: when the probe may start, while open),
// BreakerReleased from Configure. The zero value is closed and off. Not
// safe for concurrent use (the lane's lock guards it).
type Breaker struct {
	set    BreakerSettings
	st     breakerState
	closed time.Time // when it last closed: the schedule's floor
}

type breakerState struct {
	open    bool          // open or half-open
	fails   int           // consecutive failed tries while closed
	until   time.Time     // while open: when the probe may start
	openFor time.Duration // length of the current opening
	probe   *queue.Job    // the probe in flight; nil = none
}

// Configure applies new settings in place. A breaker turned off while
// open lets the lane start at the next Gate, and Configure reports
// BreakerReleased; otherwise the state is kept and the current opening is
// capped by the new MaxOpenFor.
func (b *Breaker) Configure(set BreakerSettings) Event {
	b.set = set
	switch {
	case set.Failures > 0:
		b.st.openFor = min(b.st.openFor, set.MaxOpenFor)
	case b.st.open: // a probe in flight is booked as a plain try
		b.st.until, b.st.probe = time.Time{}, nil
		return Event{Kind: BreakerReleased}
	default:
		b.st = breakerState{}
	}
	return Event{}
}

// Started books a start: the first start of an open breaker (Gate let it
// through, so its period is over) is the probe.
func (b *Breaker) Started(_ time.Time, t Try) {
	if b.st.open && b.st.probe == nil {
		b.st.probe = t.Job
	}
}

// Probe reports whether job is the probe in flight of an open breaker.
// (A probe whose answer reopens the breaker is the one Finished reports
// BreakerProbeFailed for: the lane puts its job back without using one of
// its attempts.)
func (b *Breaker) Probe(job *queue.Job) bool {
	return b.set.Failures > 0 && b.st.open && b.st.probe == job
}

// failed reports whether an answer is a failure to the breaker.
func failed(a Answer) bool { return a.Class == Failed || (a.Class == Overloaded && !a.Limited) }

// Finished books one answer at now and reports a change of state.
func (b *Breaker) Finished(now time.Time, a Answer) Event {
	s := &b.st
	if b.set.Failures <= 0 || a.Cancelled {
		return Event{}
	}
	switch {
	case s.open && s.probe == a.Job && failed(a):
		s.probe = nil
		s.openFor = min(2*s.openFor, b.set.MaxOpenFor)
		s.until = now.Add(s.openFor)
		return Event{Kind: BreakerProbeFailed, At: s.until}
	case s.open && s.probe == a.Job:
		b.close(now)
		return Event{Kind: BreakerProbed}
	case s.open: // a try started before the breaker opened
	case failed(a):
		if s.fails++; s.fails >= b.set.Failures {
			s.open, s.fails, s.openFor = true, 0, b.set.OpenFor
			s.until = now.Add(s.openFor)
			return Event{Kind: BreakerTripped, At: s.until}
		}
	default:
		s.fails = 0
	}
	return Event{}
}

// close closes the breaker at now; the schedule restarts from now.
func (b *Breaker) close(now time.Time) { b.st, b.closed = breakerState{}, now }

// Gate releases, at now, a breaker turned off while open; then it holds
// starts while the probe is in flight, answers NotBefore the probe while
// open, and NotBefore the moment it last closed while closed (no catch-up
// for the time held).
func (b *Breaker) Gate(now time.Time, _ int) Gate {
	if b.st.open && b.set.Failures <= 0 {
		b.close(now) // Configure reported it
	}
	switch {
	case b.st.probe != nil:
		return Gate{Held: true}
	case b.st.open:
		return Gate{NotBefore: b.st.until}
	}
	return Gate{NotBefore: b.closed}
}

// Quiet reports whether the breaker is closed and the lane started after
// it last closed: Gate answers that moment, which the schedule is past.
// (A closed breaker has no probe.)
func (b *Breaker) Quiet(last time.Time) bool { return !b.st.open && !b.closed.After(last) }

// State is the breaker's state at now.
func (b *Breaker) State(now time.Time) BreakerState {
	switch {
	case !b.st.open:
		return BreakerClosed
	case b.st.probe != nil || !now.Before(b.st.until):
		return BreakerHalfOpen
	}
	return BreakerOpen
}

// ProbeAt is when an open breaker's probe may start; zero while closed.
func (b *Breaker) ProbeAt() time.Time { return b.st.until }

// Describe shows the breaker's state at now and when its probe may start.
func (b *Breaker) Describe(now time.Time, v *View) { v.Breaker, v.ProbeAt = b.State(now), b.st.until }
