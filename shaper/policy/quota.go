package policy

import (
	"math"
	"time"
)

// Quota is what a downstream advertised about its rate limit with one
// answer (the IETF RateLimit-Policy and RateLimit fields, X-RateLimit-*),
// reduced by the sink to its most restrictive policy: the lowest Limit ÷
// Window, and the fewest Remaining. It travels on the Answer, so every
// policy that books answers can read it.
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

// Advertised is what a lane knows of its downstream's advertised quota, and
// holds starts by it: starts are held while the tries in flight would use
// more than the remaining quota (until the reset, or, without one, until an
// answer tells more; with nothing in flight one probe may go), and
// "remaining 0" on an answer that is not itself a pushback pauses the lane
// until the reset: Finished returns QuotaPaused with Hold set, for the
// lane's Holder (its Pushback: one pause, however the downstream asked for
// it). Its Cap (limit ÷ window) is the adaptive rate's ceiling, which
// Adaptive learns from the same answers. The zero value knows nothing and
// holds nothing.
type Advertised struct {
	// MaxWait is the lane's max wait; a pause is at most that long (and at
	// most MaxQuotaPause). 0 = unbounded.
	MaxWait time.Duration

	quotaCap

	known   bool      // left holds: the downstream said how many are left
	left    int       // starts the quota still allows until resetAt
	resetAt time.Time // when the quota refills; zero = not said
	newest  time.Time // slot of the try whose answer set left
	lastRem int       // that answer's Remaining: more later = a refill
}

// Started spends one start of the quota.
func (s *Advertised) Started(time.Time, Try) { s.left-- }

// Finished books what an answer advertised: the limit and window (the
// cap), how many starts are left (less those in flight) until when, and
// asks for a pause when none is left.
func (s *Advertised) Finished(now time.Time, a Answer) Event {
	q := a.Quota
	if q == nil {
		return Event{}
	}
	s.learn(q)
	newer := q.Remaining >= 0 && !a.Slot().Before(s.newest)
	at := time.Time{}
	if q.Reset >= 0 {
		at = minTime(now.Add(q.Reset), now.Add(s.maxPause()))
		if s.resetAt.After(now) && !(newer && q.Remaining > s.lastRem) {
			// Resets come in whole seconds, rounded up: each answer bounds
			// the window's reset from above, and the tightest bound of its
			// answers is the reset (until the quota refills: a new window).
			at = minTime(at, s.resetAt)
		}
	}
	if !newer {
		// Says nothing of what is left, or older news than we hold; its
		// reset still bounds the window's.
		if s.known && !at.IsZero() && at.Before(s.resetAt) {
			s.resetAt = at
		}
		return Event{}
	}
	s.newest, s.lastRem = a.Slot(), q.Remaining
	s.known, s.left, s.resetAt = true, q.Remaining-a.Inflight, at
	if q.Remaining == 0 && !at.IsZero() && a.Class != PushedBack {
		return Event{Kind: QuotaPaused, At: at, Hold: true}
	}
	return Event{}
}

// quotaCap is a downstream's advertised limit ÷ window, learned from the
// quotas its answers carry. The zero value knows none.
type quotaCap struct {
	limit  int           // the last advertised Limit; 0 = none
	window time.Duration // advertised, or learned from the longest reset
	cap    float64       // limit ÷ window in starts per second; 0 = none
}

// learn takes the quota's limit and window (or learns the window from its
// reset) and derives the rate cap.
func (s *quotaCap) learn(q *Quota) {
	if q.Limit > 0 {
		s.limit = q.Limit
	}
	switch {
	case q.Window > 0:
		s.window = q.Window
	case q.Reset > 0:
		// Windows are whole seconds in practice; a reset counts down from
		// one, so the longest seen (rounded up) is the window.
		s.window = max(s.window, time.Duration(math.Ceil(q.Reset.Seconds()))*time.Second)
	}
	if s.limit > 0 && s.window > 0 {
		s.cap = float64(s.limit) / s.window.Seconds()
	}
}

// maxPause is the longest a quota may hold the lane: MaxQuotaPause, or
// MaxWait when shorter.
func (s *Advertised) maxPause() time.Duration {
	if s.MaxWait > 0 {
		return min(MaxQuotaPause, s.MaxWait)
	}
	return MaxQuotaPause
}

// Gate refills the quota once its reset has passed (Limit tries less those
// in flight, or nothing known without a limit), then holds starts while
// none is left: NotBefore the reset, or Held until an answer tells more.
func (s *Advertised) Gate(now time.Time, inflight int) Gate {
	if s.known && !s.resetAt.IsZero() && !now.Before(s.resetAt) {
		s.known, s.left, s.resetAt = s.limit > 0, s.limit-inflight, time.Time{}
	}
	switch {
	case !s.known || s.left > 0:
		return Gate{}
	case !s.resetAt.IsZero():
		return Gate{NotBefore: s.resetAt}
	}
	return Gate{Held: inflight > 0}
}

// Quiet reports whether the downstream never said how many starts are
// left (nor a limit to refill them to): Gate answers the zero Gate.
func (s *Advertised) Quiet(time.Time) bool { return !s.known }

// Cap is the advertised limit ÷ window in starts per second; 0 = none.
func (s *Advertised) Cap() float64 { return s.cap }

// QuotaState is what Advertised knows, for status pages.
type QuotaState struct {
	Limit  int
	Window time.Duration
	// Left is how many starts remain until ResetAt, when Known.
	Left    int
	Known   bool
	ResetAt time.Time // zero = not said
}

// AdvertisedQuota is a downstream's advertised quota as a lane's status
// shows it (the admin API's advertised_quota): Limit starts per
// WindowSeconds, and (when the downstream said so) how many are left
// until ResetAt.
type AdvertisedQuota struct {
	Limit         int        `json:"limit"`
	WindowSeconds float64    `json:"window_seconds"`
	Remaining     *int       `json:"remaining,omitempty"`
	ResetAt       *time.Time `json:"reset_at,omitempty"`
}

// Shown is q as a lane's status shows it; nil when nothing was advertised.
func (q QuotaState) Shown() *AdvertisedQuota {
	if q.Limit <= 0 || q.Window <= 0 {
		return nil
	}
	a := &AdvertisedQuota{Limit: q.Limit, WindowSeconds: q.Window.Seconds()}
	if q.Known {
		left := max(q.Left, 0)
		a.Remaining = &left
	}
	if !q.ResetAt.IsZero() {
		t := q.ResetAt
		a.ResetAt = &t
	}
	return a
}

// State is what the policy knows now.
func (s *Advertised) State() QuotaState {
	return QuotaState{Limit: s.limit, Window: s.window, Left: s.left, Known: s.known, ResetAt: s.resetAt}
}

// Describe shows what the policy knows.
func (s *Advertised) Describe(_ time.Time, v *View) { v.Quota = s.State() }
