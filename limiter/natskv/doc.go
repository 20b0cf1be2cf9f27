// Package natskv provides the admission store that shares per-key limiter
// state between shaperd instances through a NATS JetStream key-value
// bucket (admission.store: nats).
//
// # Exact mode
//
// A decision reads the key's state from the bucket, applies the same pure
// rule the in-memory limiter uses (limiter.TokenBucket.Decide and friends,
// on Unix nanoseconds), and, if the request is admitted, writes the new
// state back with compare-and-swap on the key's revision (a publish with
// Nats-Expected-Last-Subject-Sequence); a conflict re-reads and retries, a
// bounded number of times. A rejection writes nothing: other instances only
// ever consume, so a rejection from the state just read is correct. The
// last state written is cached per key, so an instance that owns a key's
// traffic decides with one round trip (the write), and reads only after a
// conflict.
//
// # Expiry
//
// Every write carries a per-message TTL (Nats-TTL, whole seconds, rounded
// up): the time until the state becomes indistinguishable from a new key's
// (the rule's IsFresh horizon). The bucket is created with LimitMarkerTTL
// (nats-server 2.11+), which allows per-message TTLs; an idle key vanishes
// from the bucket, leaving a delete marker for LimitMarkerTTL. Update alone
// would make a key permanent, which is why writes are publishes.
//
// # Keys
//
// A key never appears in a subject: key K of downstream D is stored as
// D.<hex of the first 16 bytes of SHA-256(D, 0, K)>, which is a valid
// subject token whatever K holds.
//
// # Failures
//
// A read or write that fails or exceeds Settings.Timeout is a store error,
// counted in shaper_admission_store_errors_total{downstream}. By default
// the decision fails open (admitted); with Options.FailClosed it is an
// error wrapping ErrUnavailable, which the daemon answers as "unavailable"
// with a Retry-After.
//
// # Approximate mode
//
// With Options.Approximate (token_bucket and gcra only), decisions are
// answered from a local copy of each key's state and a background
// goroutine reconciles with the bucket every Settings.SyncInterval: it
// charges the units admitted locally since the last sync to the shared
// state (debt allowed, so over-admission is paid back) and pulls the merged
// state. Gubernator calls this GLOBAL behaviour. Until a sync, every
// instance spends the same remaining budget, so N instances may admit up to
// about (N−1) × (remaining + rate × SyncInterval) more than the limit per
// burst; the debt makes the long-run rate exact.
//
// # Clocks
//
// State times are Unix nanoseconds from each instance's clock: instances
// sharing a bucket need synchronized clocks (NTP). A skew of s lets a key
// refill up to rate × s early on the instance that runs ahead.
package natskv
