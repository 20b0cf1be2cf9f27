package shaper

import "time"

// Quota is what a downstream advertised about its rate limit with one
// answer (SPEC "Learning the downstream's limit": the IETF RateLimit-Policy
// and RateLimit fields, X-RateLimit-*), reduced by the sink to its most
// restrictive policy: the lowest Limit ÷ Window, and the fewest Remaining.
type Quota struct {
	// Limit is how many tries the downstream allows per Window; 0 = not
	// advertised.
	Limit int
	// Window is the period of Limit; 0 = not advertised (the lane then
	// learns it from Reset: the longest reset seen, in whole seconds).
	Window time.Duration
	// Remaining is how many tries are left until Reset; -1 = not advertised.
	Remaining int
	// Reset is how long after the answer the quota refills, at most
	// MaxQuotaPause; -1 = not advertised.
	Reset time.Duration
}

// MaxQuotaPause bounds how long a downstream's headers can pause a lane:
// a Reset (or a Retry-After taken from it) is cut to it, and a lane
// pauses on "remaining 0" for at most this long, and never past its
// max_wait. A header asking for longer is believed only this far.
const MaxQuotaPause = time.Hour
