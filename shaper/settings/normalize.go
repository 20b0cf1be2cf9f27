package settings

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/shaperd/shaper/shaper/policy"
)

// Defaults applied to zero fields of Shaper and Lane. They are
// the config's defaults.
const (
	DefaultShutdownGrace  = 10 * time.Second
	DefaultConcurrency    = 1
	DefaultMaxAttempts    = 5
	DefaultInitialBackoff = time.Second
	DefaultMaxBackoff     = time.Minute
	// DefaultDeadLetterMaxAge and DefaultDeadLetterMaxCount bound a
	// downstream's dead-letter store (Lane.DeadLetters).
	DefaultDeadLetterMaxAge   = 168 * time.Hour
	DefaultDeadLetterMaxCount = 10000
	// MaxRate is the highest accepted Lane.Rate (one start per µs).
	MaxRate = 1e6
	// MaxPriorities is the most priority levels a lane may have
	// (Policies.Priorities).
	MaxPriorities = 10
	// DefaultMaxDelay and MaxMaxDelay are Policies.MaxDelay's default and
	// upper bound.
	DefaultMaxDelay = 24 * time.Hour
	MaxMaxDelay     = 168 * time.Hour
	// Unknown is the downstream label for jobs naming no configured lane;
	// no lane may be called so.
	Unknown = "_unknown"
)

// Normalize validates s and returns a copy with defaults filled in. Every
// problem is reported at once (errors.Join).
func Normalize(s Shaper) (Shaper, error) {
	var errs []error
	if s.ShutdownGrace < 0 {
		errs = append(errs, fmt.Errorf("shutdown grace: must be >= 0, got %s", s.ShutdownGrace))
	}
	if s.ShutdownGrace == 0 {
		s.ShutdownGrace = DefaultShutdownGrace
	}
	seen := make(map[string]bool, len(s.Lanes))
	lanes := make([]Lane, len(s.Lanes))
	for i, ls := range s.Lanes {
		if seen[ls.Name] {
			errs = append(errs, fmt.Errorf("downstream %q: configured twice", ls.Name))
		}
		seen[ls.Name] = true
		var err error
		lanes[i], err = NormalizeLane(ls)
		if err != nil {
			errs = append(errs, err)
		}
	}
	s.Lanes = lanes
	return s, errors.Join(errs...)
}

// NormalizeLane validates one lane and fills its defaults.
func NormalizeLane(ls Lane) (Lane, error) {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("downstream %q: "+format, append([]any{ls.Name}, a...)...))
	}
	if ls.Name == "" || ls.Name == Unknown {
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
	normalizeBatch(&ls.Batch, bad)
	r := &ls.Retry
	if r.MaxAttempts < 0 || r.InitialBackoff < 0 || r.MaxBackoff < 0 {
		bad("retry: values must be >= 0, got %+v", *r)
	}
	r.MaxAttempts = cmp.Or(r.MaxAttempts, DefaultMaxAttempts)
	r.InitialBackoff = cmp.Or(r.InitialBackoff, DefaultInitialBackoff)
	r.MaxBackoff = cmp.Or(r.MaxBackoff, DefaultMaxBackoff)
	if r.MaxBackoff < r.InitialBackoff {
		bad("retry: max backoff %s is below initial backoff %s", r.MaxBackoff, r.InitialBackoff)
	}
	return ls, errors.Join(errs...)
}

// normalizeBatch validates and defaults b.
func normalizeBatch(b *Batch, bad func(string, ...any)) {
	if !b.On() {
		if *b != (Batch{}) {
			bad("batch: max jobs must be 2..%d, got %d", MaxBatchJobs, b.MaxJobs)
		}
		return
	}
	if b.MaxJobs < 2 || b.MaxJobs > MaxBatchJobs {
		bad("batch: max jobs must be 2..%d, got %d", MaxBatchJobs, b.MaxJobs)
	}
	b.MaxBytes = cmp.Or(b.MaxBytes, DefaultBatchBytes)
	if b.MaxBytes < 1 {
		bad("batch: max bytes must be >= 1, got %d", b.MaxBytes)
	}
	if b.Linger < 0 || b.Linger > MaxBatchLinger {
		bad("batch: linger must be 0..%s, got %s", MaxBatchLinger, b.Linger)
	}
	b.Encoding = cmp.Or(b.Encoding, BatchEncodings[0])
	if !slices.Contains(BatchEncodings, b.Encoding) {
		bad("batch: unknown encoding %q: want %s", b.Encoding, strings.Join(BatchEncodings, ", "))
	}
}

// normalizePolicies validates and defaults the policies of ls.
func normalizePolicies(ls *Lane, bad func(string, ...any)) {
	b := &ls.Policies
	b.MaxCost = cmp.Or(b.MaxCost, 1)
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
	b.KeyCapacity = cmp.Or(b.KeyCapacity, ls.Capacity)
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
func normalizeSchedule(ls *Lane, bad func(string, ...any)) {
	b := &ls.Policies
	b.Priorities = cmp.Or(b.Priorities, 1)
	if b.Priorities < 1 || b.Priorities > MaxPriorities {
		bad("priorities: must be 1..%d, got %d", MaxPriorities, b.Priorities)
	}
	b.MaxDelay = cmp.Or(b.MaxDelay, DefaultMaxDelay)
	if b.MaxDelay < 0 || b.MaxDelay > MaxMaxDelay {
		bad("max delay: must be 0 (= %s)..%s, got %s", DefaultMaxDelay, MaxMaxDelay, b.MaxDelay)
	}
}

// normalizeBreaker validates and defaults b.
func normalizeBreaker(b *policy.BreakerSettings, bad func(string, ...any)) {
	if b.Failures < 0 || b.OpenFor < 0 || b.MaxOpenFor < 0 {
		bad("breaker: values must be >= 0, got %+v", *b)
	}
	if b.Failures <= 0 {
		return
	}
	b.OpenFor = cmp.Or(b.OpenFor, policy.DefaultBreakerOpenFor)
	b.MaxOpenFor = cmp.Or(b.MaxOpenFor, max(policy.DefaultBreakerMaxOpenFor, b.OpenFor))
	if b.MaxOpenFor < b.OpenFor {
		bad("breaker: max open for %s is below open for %s", b.MaxOpenFor, b.OpenFor)
	}
}
