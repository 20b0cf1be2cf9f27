package shaper

import "github.com/shaperd/shaper/shaper/policy"

// normalizeBreaker validates and defaults b.
func normalizeBreaker(b *policy.BreakerSettings, bad func(string, ...any)) {
	if b.Failures < 0 || b.OpenFor < 0 || b.MaxOpenFor < 0 {
		bad("breaker: values must be >= 0, got %+v", *b)
	}
	if b.Failures <= 0 {
		return
	}
	b.OpenFor = cmp0(b.OpenFor, policy.DefaultBreakerOpenFor)
	b.MaxOpenFor = cmp0(b.MaxOpenFor, max(policy.DefaultBreakerMaxOpenFor, b.OpenFor))
	if b.MaxOpenFor < b.OpenFor {
		bad("breaker: max open for %s is below open for %s", b.MaxOpenFor, b.OpenFor)
	}
}
