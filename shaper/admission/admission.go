package admission

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shaperd/shaper/limiter"
)

// Admitter is a lane's admission rule: a per-key decision at an instant, and
// a sweep of idle keys. It is safe for concurrent use. An error wrapping
// ErrUnavailable means the store could not decide (fail closed); one
// wrapping limiter.ErrCostTooLarge, a cost that can never be admitted.
type Admitter interface {
	AllowAt(key string, now time.Time, cost int) (limiter.Decision, error)
	// Sweep forgets idle keys and returns how many.
	Sweep(now time.Time) int
	// Stats counts the keys held in this process; ok is false when the
	// state lives elsewhere (a remote store).
	Stats() (st limiter.Stats, ok bool)
	// Blocks reports whether AllowAt may block on I/O (bounded by the
	// store's timeout): the caller must then not hold a lock across it.
	Blocks() bool
}

// ErrUnavailable is wrapped by an Admitter's error when its store could not
// decide (fail closed): the job is rejected as unavailable.
var ErrUnavailable = errors.New("admission: store unavailable")

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
	Refunds  prometheus.Counter // charges given back, one per refunded limit
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
		a, err = remote(s)
	}
	if err != nil {
		return nil, err
	}
	if a == nil {
		k, err := limiter.NewKeyed(*s.Rule)
		if err != nil {
			return nil, err
		}
		a = local{k}
	}
	if s.Shadow {
		a = shadow{Admitter: a, count: c.Shadowed}
	}
	return a, nil
}

// local is a rule kept in this process.
type local struct{ *limiter.Keyed }

func (l local) Stats() (limiter.Stats, bool) { return l.Keyed.Stats(), true }
func (local) Blocks() bool                   { return false }

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
