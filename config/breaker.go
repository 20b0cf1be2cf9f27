package config

import (
	"time"

	"github.com/shaperd/shaper/shaper/policy"
)

// Bounds of downstreams.NAME.breaker.
const (
	MaxBreakerFailures   = 1000
	MinBreakerOpenFor    = 100 * time.Millisecond
	MaxBreakerMaxOpenFor = 24 * time.Hour
)

// validateBreaker checks downstreams.NAME.breaker; p is "downstreams.NAME.".
func (d Downstream) validateBreaker(v validator, p string) {
	b := d.Breaker
	v.intRange(p+"breaker.failures", b.Failures, 0, MaxBreakerFailures)
	v.duration(p+"breaker.open_for", b.OpenFor, MinBreakerOpenFor, time.Hour)
	if k := p + "breaker.max_open_for"; v.ok(k) && v.ok(p+"breaker.open_for") && (b.MaxOpenFor < b.OpenFor || b.MaxOpenFor > MaxBreakerMaxOpenFor) {
		v.add(k, "must be breaker.open_for (%s)..%s, got %s", FormatDuration(b.OpenFor), FormatDuration(MaxBreakerMaxOpenFor), FormatDuration(b.MaxOpenFor))
	}
}

// breaker converts downstreams.NAME.breaker into the shaper's settings.
func (d Downstream) breaker() policy.BreakerSettings {
	if d.Breaker.Failures == 0 {
		return policy.BreakerSettings{}
	}
	return policy.BreakerSettings{Failures: d.Breaker.Failures, OpenFor: d.Breaker.OpenFor, MaxOpenFor: d.Breaker.MaxOpenFor}
}
