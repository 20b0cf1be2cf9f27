package admission

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shaperd/shaper/limiter"
)

// Several limits at once (Settings.Limits, docs/policies.md "Several limits at
// once"): a rule of up to maxLimits limits, say 10/s and 10 000/day. A job
// is admitted only if every limit admits it. Every limit is asked, even
// after one rejected, so that the rejection's Retry-After is honest: the
// longest wait among the rejecting limits, the first instant at which all
// of them admit if nothing else arrives (each limit admits from its own
// RetryAfter on, and the ones that admitted keep admitting, since they are
// refunded). Then every limit that admitted is refunded, so a rejected job
// costs nothing: 10 jobs refused by the daily limit do not eat the
// per-second bucket.

// maxLimits is the most limits multi takes (a bit each in a mask).
const maxLimits = 64

// multi asks every limit, in order, and refunds the ones that admitted when
// one rejects. It is safe for concurrent use, but a charge and its refund
// are not atomic: a lane calls it under its lock (Blocks is false), which
// makes them so for that lane's jobs.
type multi struct {
	limits  []*limiter.Keyed
	refunds prometheus.Counter // charges given back, one per limit
}

// newMulti builds s.Limits in memory; a single limit needs no refunds.
func newMulti(s Settings, refunds prometheus.Counter) (Admitter, error) {
	switch {
	case s.Rule != nil:
		return nil, errors.New("set Admission or Limits, not both")
	case len(s.Limits) > maxLimits:
		return nil, fmt.Errorf("%d limits, at most %d", len(s.Limits), maxLimits)
	case s.Store.IsRemote():
		return nil, fmt.Errorf("admission store %q cannot hold several limits (it cannot refund a charge); use the memory store", s.Store.Kind)
	}
	m := &multi{refunds: refunds}
	for i, lc := range s.Limits {
		k, err := limiter.NewKeyed(lc)
		if err != nil {
			return nil, fmt.Errorf("limit %d: %w", i, err)
		}
		m.limits = append(m.limits, k)
	}
	if len(m.limits) == 1 {
		return local{m.limits[0], refunds}, nil // nothing to combine
	}
	return m, nil
}

// AllowAt admits cost for key at now if every limit does. A rejection
// carries the longest RetryAfter of the rejecting limits and the least
// Remaining of all limits (refunded ones counted after the refund); an
// admission the least Remaining. An error (a cost above some limit's burst
// or limit) refunds the limits that admitted before it and is returned.
func (m *multi) AllowAt(key string, now time.Time, cost int) (limiter.Decision, error) {
	var admitted uint64 // bit i: limit i admitted (was charged)
	allowRem, rejRem := math.MaxInt, math.MaxInt
	var retry time.Duration
	rejected := false
	for i, a := range m.limits {
		d, err := a.AllowAt(key, now, cost)
		if err != nil {
			m.refund(key, now, cost, admitted)
			return limiter.Decision{}, err
		}
		if d.Allowed {
			admitted |= 1 << i
			allowRem = min(allowRem, d.Remaining)
			rejRem = min(rejRem, d.Remaining+cost) // what it has once refunded
			continue
		}
		rejected = true
		rejRem = min(rejRem, d.Remaining)
		retry = max(retry, d.RetryAfter)
	}
	if !rejected {
		return limiter.Decision{Allowed: true, Remaining: allowRem}, nil
	}
	m.refund(key, now, cost, admitted)
	return limiter.Decision{Remaining: rejRem, RetryAfter: retry}, nil
}

// Refund gives cost back to every limit: all of them charged an admitted
// job.
func (m *multi) Refund(key string, now time.Time, cost int) {
	m.refund(key, now, cost, ^uint64(0)>>(maxLimits-len(m.limits)))
}

// refund gives cost back to the limits in the mask.
func (m *multi) refund(key string, now time.Time, cost int, mask uint64) {
	for i, a := range m.limits {
		if mask&(1<<i) != 0 {
			a.Refund(key, now, cost)
			inc(m.refunds)
		}
	}
}

// Sweep sweeps every limit and returns the keys forgotten in all.
func (m *multi) Sweep(now time.Time) int {
	n := 0
	for _, a := range m.limits {
		n += a.Sweep(now)
	}
	return n
}

// Stats reports the limits' counters for the lane status: Keys is the
// largest of the limits' live keys (each limit stores every key it charged,
// so summing would count a key once per limit; they forget a key at
// different times, so the largest is the closest to the distinct keys),
// the other counters are summed.
func (m *multi) Stats() (limiter.Stats, bool) {
	var st limiter.Stats
	for _, a := range m.limits {
		ls := a.Stats()
		st.Keys = max(st.Keys, ls.Keys)
		st.CapHits += ls.CapHits
		st.Evictions += ls.Evictions
		st.Forgotten += ls.Forgotten
	}
	return st, true
}

// Blocks is false: every limit is in memory.
func (m *multi) Blocks() bool { return false }
