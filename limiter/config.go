package limiter

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Mode names an admission algorithm. The string values are the config values.
type Mode string

// The algorithms.
const (
	TokenBucketMode    Mode = "token_bucket"
	FixedWindowMode    Mode = "fixed_window"
	SlidingLogMode     Mode = "sliding_log"
	SlidingCounterMode Mode = "sliding_counter"
	GCRAMode           Mode = "gcra"
)

// Modes lists every Mode in a stable order.
var Modes = []Mode{TokenBucketMode, GCRAMode, FixedWindowMode, SlidingCounterMode, SlidingLogMode}

// Limits on Config values. They keep every computation inside int64
// nanoseconds without overflow.
const (
	// DefaultMaxKeys is the key cap used when Config.MaxKeys is 0.
	DefaultMaxKeys = 1 << 20
	// MaxMaxKeys is the largest accepted Config.MaxKeys.
	MaxMaxKeys = 1 << 30
	// MaxBurst is the largest accepted Config.Burst.
	MaxBurst = 1 << 30
	// MaxLimit is the largest accepted Config.Limit for the counting windows.
	MaxLimit = math.MaxInt32
	// MaxLogLimit is the largest accepted Config.Limit for the sliding log,
	// whose state holds one 8-byte timestamp per admitted unit.
	MaxLogLimit = 1 << 20
	// MaxRate is the largest accepted Config.Rate, in tokens per second: one
	// token per nanosecond.
	MaxRate = 1e9
	// MaxWindow is the longest accepted Config.Window.
	MaxWindow = 366 * 24 * time.Hour
)

// Config describes one limit. Token bucket and GCRA use Rate and Burst;
// the window modes use Limit and Window; fields a mode does not use are
// ignored. MaxKeys bounds the number of live keys in a Keyed limiter (0 means
// DefaultMaxKeys). The zero Config is invalid: Mode is required.
type Config struct {
	Mode    Mode
	Rate    float64       // tokens per second (token_bucket, gcra), > 0
	Burst   int           // bucket capacity in cost units (token_bucket, gcra), >= 1
	Limit   int           // cost units admitted per Window (window modes), >= 1
	Window  time.Duration // window length (window modes), > 0
	MaxKeys int           // live-key cap of a Keyed limiter; 0 = DefaultMaxKeys
}

// Validate reports every problem in c at once, joined; each names the field,
// the value and the valid range, and wraps ErrInvalidConfig.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	switch c.Mode {
	case TokenBucketMode, GCRAMode:
		if !(c.Rate > 0 && c.Rate <= MaxRate) { // also rejects NaN
			bad("Rate must be > 0 and <= %g tokens per second for mode %s, got %g", float64(MaxRate), c.Mode, c.Rate)
		}
		if c.Burst < 1 || c.Burst > MaxBurst {
			bad("Burst must be 1..%d for mode %s, got %d", MaxBurst, c.Mode, c.Burst)
		}
		// Burst/Rate is the time to refill a drained bucket; beyond 2^62 ns
		// (146 years) the nanosecond arithmetic would overflow.
		if c.Rate > 0 && c.Rate <= MaxRate && c.Burst >= 1 && c.Burst <= MaxBurst &&
			1e9/c.Rate*float64(c.Burst) > 1<<62 {
			bad("Burst / Rate must be at most 146 years for mode %s, got Burst %d at Rate %g", c.Mode, c.Burst, c.Rate)
		}
	case FixedWindowMode, SlidingCounterMode, SlidingLogMode:
		maxLimit := MaxLimit
		if c.Mode == SlidingLogMode {
			maxLimit = MaxLogLimit
		}
		if c.Limit < 1 || c.Limit > maxLimit {
			bad("Limit must be 1..%d for mode %s, got %d", maxLimit, c.Mode, c.Limit)
		}
		if c.Window <= 0 || c.Window > MaxWindow {
			bad("Window must be > 0 and <= %s for mode %s, got %s", MaxWindow, c.Mode, c.Window)
		}
	default:
		bad("Mode must be one of %v, got %q", Modes, string(c.Mode))
	}
	if c.MaxKeys < 0 || c.MaxKeys > MaxMaxKeys {
		bad("MaxKeys must be 0 (default %d) or 1..%d, got %d", DefaultMaxKeys, MaxMaxKeys, c.MaxKeys)
	}
	return errors.Join(errs...)
}

// Decision is the outcome of one admission check.
type Decision struct {
	Allowed    bool
	Remaining  int           // cost units still admissible at the decision instant (after this cost, if Allowed)
	RetryAfter time.Duration // exact wait until this cost would be admitted; 0 when Allowed
}

// RetryAfterSeconds is RetryAfter rounded up to whole seconds, as an HTTP
// Retry-After header or a reply's retry_after_seconds wants it: 500 ms gives 1.
// It is 0 when the decision allowed.
func (d Decision) RetryAfterSeconds() int {
	if d.RetryAfter <= 0 {
		return 0
	}
	return int((d.RetryAfter + time.Second - 1) / time.Second)
}

// checkCost validates cost against the largest cost a limit can ever admit.
func checkCost(cost, capacity int, what string) error {
	if cost < 1 {
		return fmt.Errorf("%w, got %d", ErrInvalidCost, cost)
	}
	if cost > capacity {
		return fmt.Errorf("%w: cost %d > %s %d, it can never be admitted", ErrCostTooLarge, cost, what, capacity)
	}
	return nil
}
