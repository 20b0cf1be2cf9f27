package policy

import (
	"time"

	"github.com/shaperd/shaper/queue"
)

// A Policy answers when a lane may start next and how fast. What else it
// does is an optional role of its own (roles.go), so that no policy
// carries a method it has nothing to do in. The lane calls every method
// under its own lock, with the scheduler's or the delivery's now, so a
// Policy needs no lock of its own and never reads the clock.
type Policy interface {
	// Gate is what the policy allows at now with inflight tries in flight.
	// It may advance state that time alone changes (a quota refilled at its
	// reset, a pause seen to end).
	Gate(now time.Time, inflight int) Gate
	// Quiet reports whether Gate would now change nothing and answer
	// nothing that binds a lane whose last start took slot last (zero =
	// none yet): the zero Gate, or a NotBefore not after last, which the
	// lane's schedule is past already, and no Mark. The lane then skips
	// Gate, so it must be cheap: most lanes have most policies quiet on
	// every start.
	Quiet(last time.Time) bool
}

// Try is one delivery try of a lane.
type Try struct {
	// Job is the job tried; it identifies the try while it is in flight,
	// and its Slot is the schedule slot the try took. Policies only read it.
	Job *queue.Job
}

// Slot is the schedule slot the try took.
func (t Try) Slot() time.Time { return t.Job.Slot }

// Class is what kind of answer a try got.
type Class uint8

// Answer classes, from the sink's error.
const (
	Succeeded  Class = iota // no error
	PushedBack              // 429/503 with a Retry-After: the downstream asked to wait
	Overloaded              // 429/503 without a usable Retry-After
	Refused                 // a permanent failure (another 4xx): retrying cannot help
	Failed                  // anything else: a 5xx, a timeout, a connection error
)

// Answer is what a try's answer told.
type Answer struct {
	Try
	Class Class
	// RetryAfter is how long a PushedBack answer asked to wait (>= 0).
	RetryAfter time.Duration
	// Quota is the downstream's advertised rate limit; nil = none.
	Quota *Quota
	// Limited is set on an Overloaded answer that was a 429 (too many
	// requests): the downstream is up and limiting, not unavailable.
	Limited bool
	// Inflight is how many tries are still in flight, this one not counted.
	Inflight int
	// Cancelled is set when the delivery was cancelled at shutdown: its
	// answer says nothing of the downstream.
	Cancelled bool
	// Err is the sink's error (nil on success), for logs only.
	Err error
}

// Gate is one policy's answer to "may the lane start, and how fast". The
// zero value allows everything.
type Gate struct {
	// NotBefore: no start before it, and the lane's schedule restarts from
	// it (no catch-up for the time held). It may lie in the past, where it
	// is only a floor for the schedule. Zero = none.
	NotBefore time.Time
	// Rate caps the drain rate in starts per second; 0 = no cap.
	Rate float64
	// Limit caps the tries in flight; 0 = no limit.
	Limit int
	// Held forbids any start until an event (an answer, a reload) changes
	// the policy's mind: there is no time to wake for.
	Held bool
}

// And is the stricter of g and o in every field: the later NotBefore, the
// lower Rate and Limit (a zero is no cap), and Held if either holds.
func (g Gate) And(o Gate) Gate {
	if o.NotBefore.After(g.NotBefore) {
		g.NotBefore = o.NotBefore
	}
	if o.Rate > 0 && (g.Rate <= 0 || o.Rate < g.Rate) {
		g.Rate = o.Rate
	}
	if o.Limit > 0 && (g.Limit <= 0 || o.Limit < g.Limit) {
		g.Limit = o.Limit
	}
	g.Held = g.Held || o.Held
	return g
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
