package admission

import (
	"time"

	"github.com/shaperd/shaper/limiter"
)

// Answer is an admission rule's answer to one job, made under or outside
// the lane's lock and passed on as a value, with what it charged.
type Answer struct {
	limiter.Decision
	Err    error
	charge Charge
}

// Ask asks rule about a job of key and cost at now; a nil rule admits
// everything and charges nothing.
func Ask(rule Admitter, key string, now time.Time, cost int) Answer {
	if rule == nil {
		return Answer{Decision: limiter.Decision{Allowed: true}}
	}
	a := Answer{}
	a.Decision, a.Err = rule.AllowAt(key, now, cost)
	if a.Err == nil && a.Allowed {
		a.charge = Charge{rule: rule, key: key, at: now, cost: cost}
	}
	return a
}

// Charge is what the answer charged: nothing unless a rule admitted the
// job.
func (a Answer) Charge() Charge { return a.charge }

// Charge is what an admission rule charged for a job, to give back if the
// job is refused after all (its queue was full, its store failed). The
// zero value charged nothing.
type Charge struct {
	rule Admitter
	key  string
	at   time.Time // the decision's instant; the refund is booked at it
	cost int
}

// IsZero reports whether nothing was charged.
func (c Charge) IsZero() bool { return c.rule == nil }

// Blocks reports whether the refund does I/O (its rule's store is remote).
func (c Charge) Blocks() bool { return c.rule != nil && c.rule.Blocks() }

// Refund gives the charge back; nothing for the zero Charge.
func (c Charge) Refund() {
	if c.rule != nil {
		c.rule.Refund(c.key, c.at, c.cost)
	}
}
