// Package limiter provides admission-control algorithms that decide, per key,
// whether a request of a given cost may pass now, and if not, exactly when it
// could.
//
// # Algorithms
//
// Five rules, each a pure state transition (state in, decision and new state
// out) that a shared store can reuse: TokenBucket (decisions identical to
// golang.org/x/time/rate), GCRA (the leaky bucket as a meter, one int64 of
// state), FixedWindow (aligned to the clock), SlidingCounter (two windows,
// the previous one weighted) and SlidingLog (exact, one timestamp per
// admitted unit). Keyed holds one state per key for any of them; Limiter
// holds one state.
//
// # Time
//
// Nothing here reads the clock or starts a goroutine or timer: every
// decision takes now. Take it once per request and pass it to every limiter
// the request meets (time.Now costs tens of nanoseconds). Keyed and Limiter
// turn a time.Time into int64 nanoseconds with now.Sub from the first instant
// they saw, so values carrying a monotonic reading are immune to wall-clock
// steps. The pure rules take int64 nanoseconds directly (Unix nanoseconds
// when state is shared between processes).
//
// # Decisions
//
// A Decision says whether the cost was admitted, how many units remain
// admissible at that instant, and RetryAfter: the exact wait until the same
// cost would be admitted if nothing else happens — a retry at now+RetryAfter
// is admitted, one at now+RetryAfter−1ns is not. Costs are in units (1 per
// request, or bytes, or tokens); a cost that can never fit (above Burst or
// Limit) is an error wrapping ErrCostTooLarge, never an endless wait.
//
// # Concurrency
//
// Keyed and Limiter are safe for concurrent use; the rules are immutable
// values. A Keyed decision on a stored key locks only that key's slot (a CAS
// on the slot's hash word, undone by a plain store), so decisions on
// different keys write no shared memory. A decision that finds its key's
// slot locked by another switches that key to its shard's mutex, which lets
// one core run a burst of decisions instead of passing the slot's cache line
// back and forth; the key stays there until it is forgotten, so under heavy
// parallel load a key that collided once by chance (about 60 in 10 million
// decisions over 10 000 keys on two cores) keeps taking the mutex path,
// measured no slower at that size.
//
// # Memory
//
// Keyed stores no key strings: a seeded 62-bit hash and the state, inline in
// an open-addressing table, 27–41 bytes per live key at a million keys
// (SlidingLog adds 8 bytes per logged unit). Keys whose state equals a new
// key's are forgotten, and Config.MaxKeys caps the rest; see Keyed.
package limiter
