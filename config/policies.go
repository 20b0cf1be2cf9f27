package config

import "github.com/shaperd/shaper/shaper"

// validatePolicies checks the keys of a downstream's policies beyond a
// plain leaky bucket (cost, would-expire, shadow, rate control, fairness).
// p is "downstreams.NAME.".
func (d Downstream) validatePolicies(v validator, p string) {
	if k := p + "rate_control"; v.ok(k) && d.RateControl != RateFixed && d.RateControl != RateAdaptive {
		v.add(k, "%q is not a rate control; use fixed or adaptive", d.RateControl)
	}
	q := d.Queue
	if k := p + "queue.max_cost"; v.ok(k) && v.ok(p+"queue.capacity") && (q.MaxCost < 1 || q.MaxCost > max(q.Capacity, 1)) {
		v.add(k, "must be 1..queue.capacity (%d), got %d", q.Capacity, q.MaxCost)
	}
	d.validateKeyConcurrency(v, p)
	k := p + "queue.fairness"
	switch {
	case !v.ok(k):
		return
	case q.Fairness == FairnessNone:
		if q.KeyCapacity != 0 && v.ok(p+"queue.key_capacity") {
			v.add(p+"queue.key_capacity", "is only used with queue.fairness key; remove it, or set fairness: key")
		}
		if q.Weights != "" && v.ok(p+"queue.weights") {
			v.add(p+"queue.weights", "is only used with queue.fairness key; remove it, or set fairness: key")
		}
		return
	case q.Fairness != FairnessKey:
		v.add(k, "%q is not a fairness mode; use none or key", q.Fairness)
		return
	}
	if kc := p + "queue.key_capacity"; v.ok(kc) && q.KeyCapacity != 0 && (q.KeyCapacity < q.MaxCost || q.KeyCapacity > q.Capacity) {
		v.add(kc, "must be 0 (= queue.capacity) or queue.max_cost..queue.capacity (%d..%d), got %d", q.MaxCost, q.Capacity, q.KeyCapacity)
	}
	if kw := p + "queue.weights"; v.ok(kw) {
		if _, err := q.Weights.Parse(); err != nil {
			v.add(kw, "%s", err.Error())
		}
	}
}

// policies converts d's policy keys into the shaper's settings.
func (d Downstream) policies() shaper.Policies {
	w, _ := d.Queue.Weights.Parse() // validated
	return shaper.Policies{
		MaxCost:           d.Queue.MaxCost,
		RejectWouldExpire: d.Queue.RejectWouldExpire,
		Shadow:            d.Shadow,
		AdmissionShadow:   d.Admission != nil && d.Admission.Shadow,
		Adaptive:          d.RateControl == RateAdaptive,
		Fairness:          d.Queue.Fairness == FairnessKey,
		KeyCapacity:       d.Queue.KeyCapacity,
		Weights:           w,
		Priorities:        d.Queue.Priorities,
		KeyConcurrency:    d.Queue.KeyConcurrency,
		MaxDelay:          d.Queue.MaxDelay,
		Limits:            d.Admission.limiterConfigs(),
	}
}

// validateKeyConcurrency checks queue.key_concurrency: 0 (off) up to the
// downstream's concurrency (a cap above it would bound nothing).
func (d Downstream) validateKeyConcurrency(v validator, p string) {
	k, n := p+"queue.key_concurrency", d.Queue.KeyConcurrency
	if v.ok(k) && v.ok(p+"concurrency") && (n < 0 || n > d.Concurrency) {
		v.add(k, "must be 0 (off) or 1..concurrency (%d), got %d", d.Concurrency, n)
	}
}
