// Package limiter provides admission-control algorithms that decide, per key,
// whether a request of a given cost may pass now, and if not, exactly when it
// could.
package limiter
