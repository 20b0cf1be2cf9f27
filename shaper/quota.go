package shaper

import (
	"errors"
	"math"
	"time"

	"github.com/shaperd/shaper/queue"
)

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

// quotaState is what a lane knows of its downstream's quota. The zero
// value knows nothing. Guarded by lane.mu.
type quotaState struct {
	limit  int           // the last advertised Limit; 0 = none
	window time.Duration // advertised, or learned from the longest reset
	cap    float64       // limit ÷ window in starts per second; 0 = none

	known   bool      // left holds: the downstream said how many are left
	left    int       // starts the quota still allows until resetAt
	resetAt time.Time // when the quota refills; zero = not said
	newest  time.Time // slot of the try whose answer set left
	lastRem int       // that answer's Remaining: more later = a refill
}

// noteFeedback books what an answer said about the downstream's limit:
// malformed headers are counted; a quota updates how many starts are
// left, caps an adaptive lane's rate at quota ÷ window, and "remaining 0"
// on an answer that is not itself a pushback pauses the lane until the
// reset. Requires l.mu.
func (l *lane) noteFeedback(job *queue.Job, fb Feedback, err error, now time.Time) {
	if fb.Malformed > 0 {
		l.m.badHeaders.Add(float64(fb.Malformed))
	}
	q := fb.Quota
	if q == nil {
		return
	}
	s := &l.qs
	s.learn(q)
	if l.cfg.Adaptive && l.rate > l.ceiling() {
		l.setRate(l.ceiling())
	}
	newer := q.Remaining >= 0 && !job.Slot.Before(s.newest)
	at := time.Time{}
	if q.Reset >= 0 {
		at = minTime(now.Add(q.Reset), now.Add(l.maxQuotaPause()))
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
		return
	}
	s.newest, s.lastRem = job.Slot, q.Remaining
	s.known, s.left, s.resetAt = true, q.Remaining-l.inflight, at
	var pb *PushbackError
	if q.Remaining == 0 && !at.IsZero() && !errors.As(err, &pb) {
		l.quotaPause(job, at, now)
	}
}

// learn takes the quota's limit and window (or learns the window from its
// reset) and derives the rate cap.
func (s *quotaState) learn(q *Quota) {
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

// quotaPause pauses the lane until the quota's reset (SPEC: remaining 0;
// until is bounded by maxQuotaPause), counted as a pushback. Requires l.mu.
func (l *lane) quotaPause(job *queue.Job, until, now time.Time) {
	if !until.After(l.pushback) || !until.After(now) {
		return
	}
	l.pushback = until
	l.next = later(l.next, until)
	l.c.pushbacks++
	l.m.pushbacks.Inc()
	l.updatePaused()
	l.s.log.Info("downstream quota used up; lane paused until its reset", "downstream", l.name,
		"job_id", job.ID, "until", until)
}

// maxQuotaPause is the longest a quota may hold the lane: MaxQuotaPause,
// or the lane's max wait when shorter. Requires l.mu.
func (l *lane) maxQuotaPause() time.Duration {
	if l.cfg.MaxWait > 0 {
		return min(MaxQuotaPause, l.cfg.MaxWait)
	}
	return MaxQuotaPause
}

// refresh refills the quota once its reset has passed: Limit tries less
// those in flight, or nothing known when no limit was advertised.
// Requires l.mu.
func (s *quotaState) refresh(now time.Time, inflight int) {
	if s.known && !s.resetAt.IsZero() && !now.Before(s.resetAt) {
		s.known, s.left, s.resetAt = s.limit > 0, s.limit-inflight, time.Time{}
	}
}

// hold reports whether the quota forbids another start: until its reset,
// or (until zero) until an answer in flight tells more. With nothing in
// flight and no reset advertised, one probe may go. Requires l.mu.
func (s *quotaState) hold(inflight int) (held bool, until time.Time) {
	if !s.known || s.left > 0 {
		return false, time.Time{}
	}
	if !s.resetAt.IsZero() {
		return true, s.resetAt
	}
	return inflight > 0, time.Time{}
}

// ceiling is the most an adaptive lane may drain at: the configured rate,
// capped by an advertised quota ÷ window (never below the adaptive
// floor: the remaining count still holds the quota). Requires l.mu.
func (l *lane) ceiling() float64 {
	if l.qs.cap <= 0 {
		return l.cfg.Rate
	}
	return min(l.cfg.Rate, max(l.qs.cap, adaptFloor*l.cfg.Rate))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// AdvertisedQuota is a downstream's advertised quota, as LaneStatus shows
// it: Limit starts per WindowSeconds, and (when the downstream said so)
// how many are left until ResetAt.
type AdvertisedQuota struct {
	Limit         int        `json:"limit"`
	WindowSeconds float64    `json:"window_seconds"`
	Remaining     *int       `json:"remaining,omitempty"`
	ResetAt       *time.Time `json:"reset_at,omitempty"`
}

// advertised is q as LaneStatus shows it; nil when nothing was advertised.
// Requires lane.mu.
func (q *quotaState) advertised() *AdvertisedQuota {
	if q.limit <= 0 || q.window <= 0 {
		return nil
	}
	a := &AdvertisedQuota{Limit: q.limit, WindowSeconds: q.window.Seconds()}
	if q.known {
		left := max(q.left, 0)
		a.Remaining = &left
	}
	if !q.resetAt.IsZero() {
		t := q.resetAt
		a.ResetAt = &t
	}
	return a
}
