package shaper

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Defaults applied to zero fields of Settings and LaneSettings. They are
// the config's defaults.
const (
	DefaultShutdownGrace  = 10 * time.Second
	DefaultConcurrency    = 1
	DefaultMaxAttempts    = 5
	DefaultInitialBackoff = time.Second
	DefaultMaxBackoff     = time.Minute
	// DefaultDeadLetterMaxAge and DefaultDeadLetterMaxCount bound a
	// downstream's dead-letter store (LaneSettings.DeadLetters).
	DefaultDeadLetterMaxAge   = 168 * time.Hour
	DefaultDeadLetterMaxCount = 10000
	// MaxRate is the highest accepted LaneSettings.Rate (one start per µs).
	MaxRate = 1e6
	// MaxPriorities is the most priority levels a lane may have
	// (Policies.Priorities).
	MaxPriorities = 10
	// DefaultMaxDelay and MaxMaxDelay are Policies.MaxDelay's default and
	// upper bound.
	DefaultMaxDelay = 24 * time.Hour
	MaxMaxDelay     = 168 * time.Hour
	// unknownLabel is the downstream label for jobs naming no configured lane.
	unknownLabel = "_unknown"
)

// normalize validates s and returns a copy with defaults filled in. Every
// problem is reported at once (errors.Join).
func normalize(s Settings) (Settings, error) {
	var errs []error
	if s.ShutdownGrace < 0 {
		errs = append(errs, fmt.Errorf("shutdown grace: must be >= 0, got %s", s.ShutdownGrace))
	}
	if s.ShutdownGrace == 0 {
		s.ShutdownGrace = DefaultShutdownGrace
	}
	seen := make(map[string]bool, len(s.Lanes))
	lanes := make([]LaneSettings, len(s.Lanes))
	for i, ls := range s.Lanes {
		if seen[ls.Name] {
			errs = append(errs, fmt.Errorf("downstream %q: configured twice", ls.Name))
		}
		seen[ls.Name] = true
		var err error
		lanes[i], err = normalizeLane(ls)
		if err != nil {
			errs = append(errs, err)
		}
	}
	s.Lanes = lanes
	return s, errors.Join(errs...)
}

// normalizeLane validates one lane and fills its defaults.
func normalizeLane(ls LaneSettings) (LaneSettings, error) {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("downstream %q: "+format, append([]any{ls.Name}, a...)...))
	}
	if ls.Name == "" || ls.Name == unknownLabel {
		bad("invalid name")
	}
	if !(ls.Rate > 0 && ls.Rate <= MaxRate) || math.IsNaN(ls.Rate) {
		bad("rate: must be > 0 and <= %g per second, got %g", float64(MaxRate), ls.Rate)
	}
	if ls.Concurrency < 0 {
		bad("concurrency: must be >= 1, got %d", ls.Concurrency)
	}
	if ls.Concurrency == 0 {
		ls.Concurrency = DefaultConcurrency
	}
	if ls.Capacity < 1 {
		bad("queue capacity: must be >= 1, got %d", ls.Capacity)
	}
	if ls.MaxWait < 0 {
		bad("max wait: must be >= 0, got %s", ls.MaxWait)
	}
	normalizePolicies(&ls, bad)
	normalizeBreaker(&ls.Breaker, bad)
	r := &ls.Retry
	if r.MaxAttempts < 0 || r.InitialBackoff < 0 || r.MaxBackoff < 0 {
		bad("retry: values must be >= 0, got %+v", *r)
	}
	r.MaxAttempts = cmp0(r.MaxAttempts, DefaultMaxAttempts)
	r.InitialBackoff = cmp0(r.InitialBackoff, DefaultInitialBackoff)
	r.MaxBackoff = cmp0(r.MaxBackoff, DefaultMaxBackoff)
	if r.MaxBackoff < r.InitialBackoff {
		bad("retry: max backoff %s is below initial backoff %s", r.MaxBackoff, r.InitialBackoff)
	}
	return ls, errors.Join(errs...)
}

// cmp0 returns def when v is zero.
func cmp0[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// normalizePolicies validates and defaults the policies of ls.
func normalizePolicies(ls *LaneSettings, bad func(string, ...any)) {
	b := &ls.Policies
	b.MaxCost = cmp0(b.MaxCost, 1)
	if b.MaxCost < 1 || (ls.Capacity >= 1 && b.MaxCost > ls.Capacity) {
		bad("max cost: must be 1..capacity (%d), got %d", ls.Capacity, b.MaxCost)
	}
	normalizeSchedule(ls, bad)
	if b.KeyConcurrency < 0 || b.KeyConcurrency > ls.Concurrency {
		bad("key concurrency: must be 0 (off)..concurrency (%d), got %d", ls.Concurrency, b.KeyConcurrency)
	}
	if !b.Fairness {
		return
	}
	if ls.Durable {
		bad("fairness: needs the memory queue")
	}
	b.KeyCapacity = cmp0(b.KeyCapacity, ls.Capacity)
	if b.KeyCapacity < b.MaxCost || b.KeyCapacity > ls.Capacity {
		bad("key capacity: must be max cost (%d)..capacity (%d), got %d", b.MaxCost, ls.Capacity, b.KeyCapacity)
	}
	for k, w := range b.Weights {
		if w < 1 || w > MaxWeight {
			bad("weight of key %q: must be 1..%d, got %d", k, MaxWeight, w)
		}
	}
}

// MaxWeight bounds a fairness weight (Policies.Weights).
const MaxWeight = 1000

// normalizeSchedule validates and defaults the priority levels and the
// delay bound of ls.
func normalizeSchedule(ls *LaneSettings, bad func(string, ...any)) {
	b := &ls.Policies
	b.Priorities = cmp0(b.Priorities, 1)
	if b.Priorities < 1 || b.Priorities > MaxPriorities {
		bad("priorities: must be 1..%d, got %d", MaxPriorities, b.Priorities)
	}
	if ls.Durable && b.Priorities > 1 {
		bad("priorities: needs the memory queue (priorities are not durable yet)")
	}
	b.MaxDelay = cmp0(b.MaxDelay, DefaultMaxDelay)
	if b.MaxDelay < 0 || b.MaxDelay > MaxMaxDelay {
		bad("max delay: must be 0 (= %s)..%s, got %s", DefaultMaxDelay, MaxMaxDelay, b.MaxDelay)
	}
}
