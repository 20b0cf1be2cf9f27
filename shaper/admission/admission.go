package admission

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shaperd/shaper/limiter"
)

// Admitter is a lane's admission rule: a per-key decision at an instant, a
// refund of a decision's charge, and a sweep of idle keys. It is safe for
// concurrent use. An error wrapping ErrUnavailable means the store could
// not decide (fail closed); one wrapping limiter.ErrCostTooLarge, a cost
// that can never be admitted.
type Admitter interface {
	AllowAt(key string, now time.Time, cost int) (limiter.Decision, error)
	// Refund gives key back the cost that AllowAt admitted at now, for a
	// job that was not queued after all (its queue's store failed or
	// refused it), as limiter.Keyed.Refund does; every limit charged is
	// given back and counted in Counters.Refunds. A remote store's refund
	// is best effort (one that fails keeps the charge) and may block like
	// AllowAt (Blocks). In shadow mode nothing is refunded: a job the
	// rule refused was admitted uncharged, and a refund cannot tell it
	// from one the rule charged.
	Refund(key string, now time.Time, cost int)
	// Sweep forgets idle keys and returns how many.
	Sweep(now time.Time) int
	// Stats counts the keys held in this process; ok is false when the
	// state lives elsewhere (a remote store).
	Stats() (st limiter.Stats, ok bool)
	// Blocks reports whether AllowAt may block on I/O (bounded by the
	// store's timeout): the caller must then not hold a lock across it.
	Blocks() bool
}

// Store says where a rule's per-key state lives (the config's
// admission.store and its policies). The zero value is this process's
// memory.
type Store struct {
	// Kind is "" or "memory" for a limiter.Keyed in this process; any other
	// kind is built by a Remote.
	Kind string
	// FailClosed and Approximate are the store's policies, passed through
	// to the Remote.
	FailClosed  bool
	Approximate bool
}

// IsRemote reports whether the store is outside the process.
func (s Store) IsRemote() bool { return s.Kind != "" && s.Kind != "memory" }

// Settings are one lane's admission rule.
type Settings struct {
	Lane string
	// Rule is a single limit; Limits several at once (set one or neither).
	Rule   *limiter.Config
	Limits []limiter.Config
	Store  Store
	// Shadow counts refusals in Shadowed and admits anyway.
	Shadow bool
}

// Remote builds the Admitter of a rule whose Store is remote (e.g. a NATS
// KV bucket shared by instances). A nil Admitter means: keep it in memory.
type Remote func(Settings) (Admitter, error)

// Counters are where an Admitter counts what it did beside deciding.
// Nil counters count nothing.
type Counters struct {
	Refunds  prometheus.Counter // charges given back, one per refunded limit (Refund or several limits)
	Shadowed prometheus.Counter // refusals skipped in shadow mode
}

// New builds s's Admitter, or returns nil when s has no rule: in memory, or
// through remote for a remote store; then wrapped for shadow mode.
func New(s Settings, remote Remote, c Counters) (Admitter, error) {
	var a Admitter
	var err error
	switch {
	case len(s.Limits) > 0:
		a, err = newMulti(s, c.Refunds)
	case s.Rule == nil:
		return nil, nil
	case s.Store.IsRemote():
		if remote == nil {
			return nil, fmt.Errorf("admission store %q: no remote store was given", s.Store.Kind)
		}
		if a, err = remote(s); a != nil {
			a = counted{Admitter: a, refunds: c.Refunds}
		}
	}
	if err != nil {
		return nil, err
	}
	if a == nil {
		k, err := limiter.NewKeyed(*s.Rule)
		if err != nil {
			return nil, err
		}
		a = local{k, c.Refunds}
	}
	if s.Shadow {
		a = shadow{Admitter: a, count: c.Shadowed}
	}
	return a, nil
}

// local is a rule kept in this process.
type local struct {
	*limiter.Keyed
	refunds prometheus.Counter // nil = not counted
}

func (l local) Stats() (limiter.Stats, bool) { return l.Keyed.Stats(), true }
func (local) Blocks() bool                   { return false }

func (l local) Refund(key string, now time.Time, cost int) {
	l.Keyed.Refund(key, now, cost)
	inc(l.refunds)
}

// counted is a remote store's Admitter with its refunds counted.
type counted struct {
	Admitter
	refunds prometheus.Counter // nil = not counted
}

func (c counted) Refund(key string, now time.Time, cost int) {
	c.Admitter.Refund(key, now, cost)
	inc(c.refunds)
}

// inc increments c unless it is nil.
func inc(c prometheus.Counter) {
	if c != nil {
		c.Inc()
	}
}

// shadow admits what its Admitter refuses, counting each refusal: a
// refused job is admitted, and the limiter was not charged for it.
type shadow struct {
	Admitter
	count prometheus.Counter
}

func (a shadow) AllowAt(key string, now time.Time, cost int) (limiter.Decision, error) {
	d, err := a.Admitter.AllowAt(key, now, cost)
	if err == nil && !d.Allowed {
		if a.count != nil {
			a.count.Inc()
		}
		return limiter.Decision{Allowed: true}, nil
	}
	return d, err
}

// Refund gives nothing back (see Admitter): shadow mode only counts.
func (shadow) Refund(string, time.Time, int) {}
