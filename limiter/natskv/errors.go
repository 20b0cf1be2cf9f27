package natskv

import "errors"

// ErrUnavailable is wrapped by a fail-closed Limiter's error when the bucket
// could not be read or written in time.
var ErrUnavailable = errors.New("natskv: admission store unavailable")

// ErrIncompatible reports an existing bucket that cannot hold per-key TTLs
// (created without LimitMarkerTTL); it is never changed automatically.
var ErrIncompatible = errors.New("natskv: existing bucket is incompatible")

// errConflicts is the store error of a write that lost every
// compare-and-swap try.
var errConflicts = errors.New("natskv: compare-and-swap kept conflicting")
