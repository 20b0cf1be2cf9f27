package limiter

import (
	"fmt"
	"math"
	"time"
)

// TokenBucket is the token-bucket rule: a bucket of Burst tokens refilled
// continuously at Rate tokens per second; a request of cost n takes n tokens
// or is rejected. A new key starts full, so it may burst Burst units at once;
// over any span T at most Burst + Rate×T units are admitted.
//
// The arithmetic is that of golang.org/x/time/rate (float64 tokens, lazily
// refilled from the elapsed time), so decisions equal rate.Limiter.AllowN at
// the same instants. TokenBucket is an immutable value, safe for concurrent
// use; it holds no state of its own — see TokenBucketState, Keyed and Limiter.
type TokenBucket struct {
	rate  float64
	burst int
	// fullNear and fullAny are the least elapsed nanoseconds after which
	// advance's float arithmetic reaches Burst from Burst−1 and from −1
	// tokens (see fullAfter): a bucket holding at least that many tokens is
	// full again after that long, known without the float division.
	fullNear, fullAny int64
}

// TokenBucketState is one key's token bucket: Tokens available at instant
// Last (nanoseconds on the caller's timeline, e.g. Unix nanoseconds).
// Tokens may be a hair below zero, as in x/time/rate. Its zero value is an
// empty bucket; a new key's state is TokenBucket.Fresh.
type TokenBucketState struct {
	Tokens float64
	Last   int64
}

// NewTokenBucket returns the rule for rate tokens per second (> 0) and a
// bucket of burst tokens (>= 1).
func NewTokenBucket(rate float64, burst int) (TokenBucket, error) {
	if err := (Config{Mode: TokenBucketMode, Rate: rate, Burst: burst}).Validate(); err != nil {
		return TokenBucket{}, err
	}
	return TokenBucket{
		rate:     rate,
		burst:    burst,
		fullNear: fullAfter(float64(burst)-1, rate, burst),
		fullAny:  fullAfter(-1, rate, burst),
	}, nil
}

// fullAfter returns the least d >= 0 for which from + seconds(d)×rate >=
// burst in float64, the arithmetic of advance, or MaxInt64 if there is none.
// That arithmetic is monotonic in d and in from (so are seconds, and float
// multiplication and addition rounded to nearest), so a bucket holding at
// least from tokens is full after any d >= fullAfter(from): advance may
// return Burst without computing, and returns exactly what it would have.
func fullAfter(from, rate float64, burst int) int64 {
	full := func(d int64) bool { return from+seconds(d)*rate >= float64(burst) }
	if full(0) {
		return 0
	}
	if !full(math.MaxInt64) {
		return math.MaxInt64
	}
	lo, hi := int64(0), int64(math.MaxInt64) // !full(lo), full(hi)
	for hi-lo > 1 {
		if mid := lo + (hi-lo)/2; full(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// Rate returns the refill rate in tokens per second.
func (r TokenBucket) Rate() float64 { return r.rate }

// Burst returns the bucket capacity in tokens.
func (r TokenBucket) Burst() int { return r.burst }

// Fresh returns the state of a key never seen: a full bucket.
func (r TokenBucket) Fresh(now int64) TokenBucketState { return freshPure[TokenBucketState](r, now) }

// Decide admits or rejects cost units at now (nanoseconds) and returns the
// decision and the new state; s is not modified. It returns an error only for
// cost < 1 (ErrInvalidCost) or cost > Burst (ErrCostTooLarge).
func (r TokenBucket) Decide(s TokenBucketState, now int64, cost int) (Decision, TokenBucketState, error) {
	return decidePure(r, s, now, cost)
}

// IsFresh reports whether s is indistinguishable from Fresh at now (the
// bucket has refilled to Burst), so the key may be forgotten.
func (r TokenBucket) IsFresh(s TokenBucketState, now int64) bool { return r.isFresh(&s, now) }

func (r TokenBucket) init(s *TokenBucketState, now int64) {
	*s = TokenBucketState{Tokens: float64(r.burst), Last: now}
}

func (r TokenBucket) capacity() int        { return r.burst }
func (r TokenBucket) capacityName() string { return "burst" }

// seconds is time.Duration(d).Seconds(), spelled out because x/time/rate's
// rounding depends on it.
func seconds(d int64) float64 {
	if uint64(d) < uint64(time.Second) {
		return float64(d) / 1e9 // the same value: 0 + x == x
	}
	sec := d / int64(time.Second)
	nsec := d % int64(time.Second)
	return float64(sec) + float64(nsec)/1e9
}

// advance returns the tokens in s at t, as x/time/rate's advance does: a t
// before s.Last refills nothing.
func (r TokenBucket) advance(s *TokenBucketState, t int64) float64 {
	last := s.Last
	if t < last {
		last = t
	}
	// The common case, a key back after its bucket refilled, skips the
	// float division; exact, see fullAfter.
	if d := t - last; d >= r.fullNear && s.Tokens >= float64(r.burst)-1 || d >= r.fullAny && s.Tokens >= -1 {
		return float64(r.burst)
	}
	tokens := s.Tokens + seconds(t-last)*r.rate
	if b := float64(r.burst); tokens > b {
		tokens = b
	}
	return tokens
}

// admits reports whether a bucket left with after tokens accepts the request.
// x/time/rate admits while the wait for the deficit truncates to 0 ns.
func (r TokenBucket) admits(after float64) bool {
	return after >= 0 || (-after/r.rate)*float64(time.Second) < 1
}

// admitFull is decide for the common case, a key back after its bucket
// refilled from at least Burst−1 tokens (advance's first shortcut, see
// fullAfter), small enough to be inlined into the keyed table's decision,
// which calls decideGeneral only when ok is false (s is then untouched).
func (r TokenBucket) admitFull(s *TokenBucketState, now int64, cost int) (d Decision, ok bool) {
	if now-s.Last >= r.fullNear && s.Tokens >= float64(r.burst-1) {
		s.Tokens, s.Last = float64(r.burst-cost), now
		return Decision{Allowed: true, Remaining: r.burst - cost}, true
	}
	return d, false
}

func (r TokenBucket) decide(s *TokenBucketState, now int64, cost int) Decision {
	if d, ok := r.admitFull(s, now, cost); ok {
		return d
	}
	return r.decideGeneral(s, now, cost)
}

// decideGeneral is decide without the admitFull shortcut.
func (r TokenBucket) decideGeneral(s *TokenBucketState, now int64, cost int) Decision {
	tokens := r.advance(s, now)
	after := tokens - float64(cost)
	if r.admits(after) {
		// Last never moves back. x/time/rate sets it to now even when now
		// is earlier, and the next request then earns the refill of that
		// interval a second time; instants arrive out of order whenever
		// decisions for one key run concurrently, or on instances whose
		// clocks differ (a shared NATS KV store), so that would over-admit.
		s.Tokens, s.Last = after, max(s.Last, now)
		return Decision{Allowed: true, Remaining: floorNonNeg(after)}
	}
	return Decision{Remaining: floorNonNeg(tokens), RetryAfter: time.Duration(r.retryAfter(s, now, cost, tokens))}
}

// retryAfter returns the least d >= 1 ns such that cost is admitted at now+d
// from state s. The float estimate is almost always exact (two checks); the
// searches make it exact whatever the rounding, since admission is
// monotonic in d.
func (r TokenBucket) retryAfter(s *TokenBucketState, now int64, cost int, tokens float64) int64 {
	// Refill starts at s.Last if now is earlier (time went backwards), and
	// admits tolerates a deficit worth under 1 ns, hence the − 1.
	hi := int64(1)
	if est := float64(max(s.Last-now, 0)) + math.Ceil((float64(cost)-tokens)/r.rate*1e9-1); est > 1 {
		hi = int64(est)
	}
	lo := int64(0) // !okAt(0): we were just rejected
	if r.okAt(s, now+hi, cost) {
		if hi == 1 || !r.okAt(s, now+hi-1, cost) {
			return hi // the usual case
		}
		for step := int64(1); hi-lo > 1; step *= 2 {
			c := max(hi-step, lo+1)
			if !r.okAt(s, now+c, cost) {
				lo = c
				break
			}
			hi = c
		}
	} else {
		for step := int64(1); ; step *= 2 {
			lo, hi = hi, hi+step
			if r.okAt(s, now+hi, cost) {
				break
			}
		}
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if r.okAt(s, now+mid, cost) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// okAt reports whether cost would be admitted at t from state s.
func (r TokenBucket) okAt(s *TokenBucketState, t int64, cost int) bool {
	return r.admits(r.advance(s, t) - float64(cost))
}

func (r TokenBucket) isFresh(s *TokenBucketState, now int64) bool {
	return r.advance(s, now) >= float64(r.burst)
}

func (r TokenBucket) freshAt(s *TokenBucketState) int64 {
	missing := float64(r.burst) - s.Tokens
	if missing <= 0 {
		return s.Last
	}
	return s.Last + int64(math.Ceil(missing/r.rate*1e9))
}

func (r TokenBucket) String() string {
	return fmt.Sprintf("token_bucket(rate=%g/s, burst=%d)", r.rate, r.burst)
}

func floorNonNeg(x float64) int {
	if x < 0 {
		return 0
	}
	if x > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(x)
}
