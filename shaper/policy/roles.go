package policy

import "time"

// Every policy answers a Gate (Policy). What only some policies do is a
// role of its own, a small interface, so that none carries a method it has
// nothing to do in:
//
//	role        method      played by
//	Starter     Started     Advertised, Breaker, Kept
//	Finisher    Finished    Advertised, Adaptive, Breaker, Pushback
//	Holder      Hold        Pushback
//	Forecaster  Forecast    Paused, Maintenance
//	Marker      Mark        Paused, Pushback, Maintenance
//	Waker       NextChange  Maintenance
//	Describer   Describe    Advertised, Breaker, Pushback, Paused, Maintenance
//
// Compose checks once which roles each policy plays, as a queue kind's
// Roles says which of the queue's roles it plays; the lane then asks the
// Set, never a policy by its type.
//
// A policy holds no pointer to another and no func of the lane: what it
// decided travels back in the values it returns. A Finisher returns an
// Event, which the lane logs and counts; one that asks for a pause
// (Event.Hold: the advertised quota, used up) is handed to the Holders
// (Pushback), so that the lane has one pause however the downstream asked
// for it. What two policies both need of an answer (the advertised limit ÷
// window that also caps the adaptive rate) each learns from the Answer.

// Starter is the role of a policy that books the tries the lane starts.
type Starter interface {
	// Started books a try the lane started at now.
	Started(now time.Time, t Try)
}

// Finisher is the role of a policy that books the answers to tries.
type Finisher interface {
	// Finished books the answer to a try, received at now, and returns
	// what it decided that the lane reports; the zero Event = nothing.
	Finished(now time.Time, a Answer) Event
}

// Holder is the role of a policy that pauses the lane when another asks
// (an Event with Hold set).
type Holder interface {
	// Hold pauses until until, unless a pause already lasts that long or
	// until is not after now; it reports whether it paused.
	Hold(now, until time.Time) bool
}

// Forecaster is the role of a policy whose holds are known ahead (a timed
// or an indefinite pause, maintenance windows): the intake side asks it
// when a job would start.
type Forecaster interface {
	// Forecast is when a start that has span of the lane's time ahead of
	// it from at would be: span, with every hold of the policy on the way
	// waited out. ok is false while the policy holds the lane until
	// someone resumes it: no start is scheduled, none can be predicted.
	Forecast(at time.Time, span time.Duration) (start time.Time, ok bool)
}

// Marker is the role of a policy whose holds the lane exports.
type Marker interface {
	// Mark is what the lane exports of the policy's hold as its last Gate
	// left it; asked right after Gate, and taken as zero while Quiet.
	Mark() Mark
}

// Waker is the role of a policy whose state changes with time alone even
// when no start is due (a maintenance window begins or ends), so that the
// lane wakes then and what it exports follows.
type Waker interface {
	// NextChange is when the policy next changes after now; zero = never.
	NextChange(now time.Time) time.Time
}

// Describer is the role of a policy with state to show on the lane's
// status.
type Describer interface {
	// Describe fills the policy's part of v at now.
	Describe(now time.Time, v *View)
}

// Event is what a policy decided on an answer (or a reload) that the lane
// reports: it logs it and counts it. The zero Event is nothing.
// (Its fields are in this order so that it fits in 32 bytes, which the
// compiler keeps in registers: Finished returns one for every answer.)
type Event struct {
	// At is when a pause ends (QuotaPaused, PushbackPaused), or when an
	// open breaker's probe may start (BreakerTripped, BreakerProbeFailed).
	At   time.Time
	Kind EventKind
	// Hold asks the Holders to pause until At: the event is reported only
	// if one of them paused (a pause that lasts as long absorbs it).
	Hold bool
}

// Events are what a Set's Finishers decided on one answer.
type Events []Event

// Has reports whether one of evs is of kind k.
func (evs Events) Has(k EventKind) bool {
	for _, ev := range evs {
		if ev.Kind == k {
			return true
		}
	}
	return false
}

// At is the At of the last of evs of kind k; zero = none.
func (evs Events) At(k EventKind) time.Time {
	var at time.Time
	for _, ev := range evs {
		if ev.Kind == k {
			at = ev.At
		}
	}
	return at
}

// EventKind is what an Event reports.
type EventKind uint8

// Events.
const (
	QuotaPaused        EventKind = iota + 1 // the advertised quota is used up: paused until its reset
	PushbackPaused                          // a 429/503 with Retry-After paused the lane until At
	RateCut                                 // the adaptive rate was cut
	BreakerTripped                          // closed → open after Failures failed tries
	BreakerProbeFailed                      // the probe failed: open again, for longer
	BreakerProbed                           // the probe succeeded: closed
	BreakerReleased                         // turned off while open: closed, held jobs released
)

// Mark is what the lane exports of the holds behind a Gate: the paused and
// maintenance gauges, and a drain rate shown as 0. The zero Mark is none.
type Mark uint8

// Marks.
const (
	MarkPaused      Mark = 1 << iota // a pause runs: an operator's or the downstream's
	MarkIdle                         // drains nothing by intent (an operator's pause, maintenance): rate shown as 0
	MarkMaintenance                  // inside a maintenance window
)

// View is what a lane's policies show on its status (Set.View): each
// Describer fills its part.
type View struct {
	Paused        bool         // an operator's pause holds starts
	PausedUntil   time.Time    // its end; zero = until resumed
	Window        Span         // the maintenance window now is in, or the next (within eight days)
	HasWindow     bool         // false without windows
	PushbackUntil time.Time    // when the latest pushback pause ends (or ended); zero = never
	Quota         QuotaState   // what the downstream advertised
	Breaker       BreakerState // BreakerClosed without a breaker
	ProbeAt       time.Time    // when an open breaker's probe may start; zero while closed
}

// Set is a lane's policies, with the roles each plays found once
// (Compose). Not safe for concurrent use (the lane's lock guards it).
type Set struct {
	all         []member
	starters    []Starter
	finishers   []Finisher
	holders     []Holder
	forecasters []Forecaster
	wakers      []Waker
	describers  []Describer
	events      Events // Finished's answer, reused
}

// member is a policy of a Set, and its Marker role (nil: none).
type member struct {
	Policy
	mark Marker
}

// Compose makes the Set of ps, in the order they book a try or an answer.
func Compose(ps ...Policy) Set {
	s := Set{all: make([]member, len(ps)), starters: roles[Starter](ps), finishers: roles[Finisher](ps),
		holders: roles[Holder](ps), forecasters: roles[Forecaster](ps), wakers: roles[Waker](ps),
		describers: roles[Describer](ps)}
	for i, p := range ps {
		s.all[i].Policy = p
		s.all[i].mark, _ = p.(Marker)
	}
	return s
}

// roles lists the policies of ps that play the role R, in order; nil if
// none does.
func roles[R any](ps []Policy) []R {
	n := 0
	for _, p := range ps {
		if _, ok := p.(R); ok {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]R, 0, n) // a lane keeps it: no room to spare
	for _, p := range ps {
		if r, ok := p.(R); ok {
			out = append(out, r)
		}
	}
	return out
}

// Started books a try the lane started at now with every Starter.
func (s *Set) Started(now time.Time, t Try) {
	for _, p := range s.starters {
		p.Started(now, t)
	}
}

// Finished books an answer received at now with every Finisher, in order,
// and returns what they decided, valid until the next call: an Event that
// asks for a pause goes to the Holders first, and is returned only when
// one of them paused.
func (s *Set) Finished(now time.Time, a Answer) Events {
	s.events = s.events[:0]
	for _, p := range s.finishers {
		if ev := p.Finished(now, a); ev.Kind != 0 {
			s.add(now, ev)
		}
	}
	return s.events
}

// add appends ev to the events of Finished, unless it asks for a pause
// that no Holder took.
func (s *Set) add(now time.Time, ev Event) {
	if ev.Hold {
		held := false
		for _, h := range s.holders {
			held = h.Hold(now, ev.At) || held
		}
		if !held {
			return
		}
	}
	s.events = append(s.events, ev)
}

// Gate asks every policy that is not quiet at now and returns the
// strictest answer of all (see Gate.And), with the Marks of those that
// play Marker; last is the slot of the lane's last start (zero = none).
// Its NotBefore may be earlier than a quiet policy's, but never later than
// last when it is.
func (s *Set) Gate(now time.Time, inflight int, last time.Time) (Gate, Mark) {
	var g Gate
	var m Mark
	for _, p := range s.all {
		if p.Quiet(last) {
			continue
		}
		g = g.And(p.Gate(now, inflight))
		if p.mark != nil {
			m |= p.mark.Mark()
		}
	}
	return g, m
}

// Forecast is when a start that has span of the lane's time ahead of it
// from at would be, every Forecaster's holds on the way waited out, each
// over the span the ones before it stretched (exact for one; with several,
// a time two of them hold counts twice: later, never earlier). ok is false
// while one holds the lane until someone resumes it: no start is scheduled.
func (s *Set) Forecast(at time.Time, span time.Duration) (time.Time, bool) {
	end := at.Add(span)
	for _, f := range s.forecasters {
		e, ok := f.Forecast(at, end.Sub(at))
		if !ok {
			return time.Time{}, false
		}
		end = e
	}
	return end, true
}

// NextChange is the earliest time after now a Waker changes; zero = none.
func (s *Set) NextChange(now time.Time) time.Time {
	var next time.Time
	for _, w := range s.wakers {
		if c := w.NextChange(now); !c.IsZero() && (next.IsZero() || c.Before(next)) {
			next = c
		}
	}
	return next
}

// View is what the policies show at now.
func (s *Set) View(now time.Time) View {
	v := View{Breaker: BreakerClosed}
	for _, d := range s.describers {
		d.Describe(now, &v)
	}
	return v
}
