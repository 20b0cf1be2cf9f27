package limiter

import (
	"errors"
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

// ErrCostTooLarge is returned when a cost can never be admitted because it
// exceeds the burst (token bucket, GCRA) or the limit (windows).
var ErrCostTooLarge = errors.New("limiter: cost exceeds capacity")

// Config describes one limit. Token bucket and GCRA use Rate and Burst;
// the window modes use Limit and Window. MaxKeys bounds the number of live
// keys in a Keyed limiter (0 means the package default).
type Config struct {
	Mode    Mode
	Rate    float64       // tokens per second (token_bucket, gcra)
	Burst   int           // bucket capacity (token_bucket, gcra)
	Limit   int           // requests per Window (window modes)
	Window  time.Duration // window length (window modes)
	MaxKeys int
}

// Decision is the outcome of one admission check.
type Decision struct {
	Allowed    bool
	Remaining  int           // cost units still admissible at the decision instant
	RetryAfter time.Duration // exact wait until this cost would be admitted; 0 when Allowed
}
