package limiter

import "errors"

// ErrCostTooLarge is returned when a cost can never be admitted because it
// exceeds the burst (token bucket, GCRA) or the limit (windows).
var ErrCostTooLarge = errors.New("limiter: cost exceeds capacity")

// ErrInvalidCost is returned for a cost below 1.
var ErrInvalidCost = errors.New("limiter: cost must be at least 1")

// ErrInvalidConfig is wrapped by every Config validation error.
var ErrInvalidConfig = errors.New("limiter: invalid config")
