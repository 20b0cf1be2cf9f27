package limiter

// rule is one algorithm's state transition, implemented by TokenBucket, GCRA,
// FixedWindow, SlidingCounter and SlidingLog for their state types. Times are
// int64 nanoseconds on one timeline. Methods take *S so the keyed table can
// update states in place without copying; none allocates except SlidingLog
// growing its log.
type rule[S any] interface {
	// init sets *s to the state of a key never seen, at now.
	init(s *S, now int64)
	// decide admits or rejects cost at now and updates *s; cost is
	// already validated to be in 1..capacity().
	decide(s *S, now int64, cost int) Decision
	// isFresh reports whether *s behaves, from now on, exactly like a key
	// never seen.
	isFresh(s *S, now int64) bool
	// freshAt estimates the instant from which isFresh holds; the keyed
	// table evicts the state that becomes fresh first.
	freshAt(s *S) int64
	// capacity is the largest cost that can ever be admitted.
	capacity() int
	// capacityName names capacity in errors ("burst", "limit").
	capacityName() string
}

// decidePure implements the exported value-in, value-out Decide methods.
func decidePure[S any, R rule[S]](r R, s S, now int64, cost int) (Decision, S, error) {
	if err := checkCost(cost, r.capacity(), r.capacityName()); err != nil {
		return Decision{}, s, err
	}
	d := r.decide(&s, now, cost)
	return d, s, nil
}

func freshPure[S any, R rule[S]](r R, now int64) S {
	var s S
	r.init(&s, now)
	return s
}
