package shaper

import "github.com/shaperd/shaper/shaper/settings"

// Defaults applied to zero fields of Settings and LaneSettings, and the
// bounds of their values (package settings validates them).
const (
	DefaultShutdownGrace      = settings.DefaultShutdownGrace
	DefaultConcurrency        = settings.DefaultConcurrency
	DefaultMaxAttempts        = settings.DefaultMaxAttempts
	DefaultInitialBackoff     = settings.DefaultInitialBackoff
	DefaultMaxBackoff         = settings.DefaultMaxBackoff
	DefaultDeadLetterMaxAge   = settings.DefaultDeadLetterMaxAge
	DefaultDeadLetterMaxCount = settings.DefaultDeadLetterMaxCount
	MaxRate                   = settings.MaxRate
	MaxPriorities             = settings.MaxPriorities
	DefaultMaxDelay           = settings.DefaultMaxDelay
	MaxMaxDelay               = settings.MaxMaxDelay
	MaxWeight                 = settings.MaxWeight
	// unknownLabel is the downstream label for jobs naming no configured lane.
	unknownLabel = settings.Unknown
)

// cmp0 returns def when v is zero.
func cmp0[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
