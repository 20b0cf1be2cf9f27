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
// the request meets: the clock is read once, and every limit judges the
// request at the same instant. Keyed and Limiter turn a time.Time into
// int64 nanoseconds with now.Sub from the first instant they saw, so values
// carrying a monotonic reading are immune to wall-clock steps. The pure
// rules take int64 nanoseconds directly (Unix nanoseconds when state is
// shared between processes).
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
// values. Keyed spreads keys over up to 64 shards by a seeded hash, each
// shard a sync.Mutex and the table it guards: a decision holds its key's
// shard mutex, so decisions on keys of different shards do not wait for
// each other. A Limiter's decisions take its one mutex.
//
// # Memory
//
// Keyed stores no key strings: a seeded 64-bit hash and the state, inline
// in an open-addressing table kept at most 80 % full, so a live key costs
// its slot (StateBytesPerKey; SlidingLog adds 8 bytes per logged unit) plus
// the table's slack. Keys whose state equals a new key's are
// forgotten, and Config.MaxKeys caps the rest; see Keyed.
package limiter
