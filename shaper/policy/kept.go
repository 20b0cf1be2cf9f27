package policy

import (
	"math"
	"time"
)

// A learned rate that is kept: what an adaptive lane learned — its
// effective rate and the controller's idea of the downstream's window — is
// saved where every instance can read it, so that a restarted daemon, or
// another instance taking over a durable queue's drain, starts where the
// last drainer was rather than at the ceiling. Kept holds the rules; the
// lane's owner does the reading and saving.
//
//   - Read: for every lane that becomes adaptive, before it starts
//     anything; and by a durable lane whose queue hands it jobs after it
//     started nothing for TakeoverGap (a failover of the pinned drainer
//     looks like that): the lane starts nothing until the read answered.
//   - Used: when not older than LearnedMaxAge and newer than what the lane
//     kept itself; capped by the ceiling (and a reload that lowers the
//     ceiling caps the rate at once, as before), never below KeptFloor of
//     it.
//   - Saved: when the value changed since it was last saved or read (never
//     per job; the bare ceiling is not saved while nothing was learned),
//     and again after KeepRefresh while the lane starts jobs.
const (
	// LearnedMaxAge is the age past which a kept value is ignored.
	LearnedMaxAge = time.Hour
	// KeepRefresh is how often an unchanged value is saved again while
	// the lane starts jobs, so that it does not age out.
	KeepRefresh = LearnedMaxAge / 4
	// TakeoverGap is how long a lane must have started nothing, and not
	// read its kept value, before jobs handed to it count as a takeover.
	TakeoverGap = 5 * time.Second
	// KeptFloor is the lowest fraction of the ceiling a kept rate is
	// restored at.
	KeptFloor = 0.05
)

// Learned is what an adaptive lane learned of its downstream.
type Learned struct {
	Rate   float64       // effective drain rate, starts per second
	Window time.Duration // the downstream's window (memory) as learned; 0 = unknown
	At     time.Time     // when the lane ran at it
}

// Kept is a lane's side of its kept learned rate, and a Policy: it holds
// the lane's starts while a takeover read is in flight. It counts the
// lane's starts itself. The zero value keeps nothing and holds nothing;
// Configure turns it on for an adaptive lane.
type Kept struct {
	on        bool
	ceiling   float64
	v         Learned   // last value saved or used; zero = none
	starts    uint64    // tries started
	saved     uint64    // starts when v was saved or used
	restoring bool      // a takeover read is in flight: no start until it answers
	asked     time.Time // when the value was last read
}

// Configure sets whether the lane is adaptive and its configured rate
// (the ceiling a kept rate is capped at).
func (k *Kept) Configure(adaptive bool, ceiling float64) { k.on, k.ceiling = adaptive, ceiling }

// Started counts a start.
func (k *Kept) Started(time.Time, Try) { k.starts++ }

// Gate holds every start while a takeover read is in flight.
func (k *Kept) Gate(time.Time, int) Gate { return Gate{Held: k.restoring} }

// Quiet reports whether no takeover read is in flight: Gate answers the
// zero Gate.
func (k *Kept) Quiet(time.Time) bool { return !k.restoring }

// ToSave returns the value to keep at now for a lane running at rate with
// the learned window, the start count to hand back to Saved, and whether
// it is due to be saved.
func (k *Kept) ToSave(now time.Time, rate float64, window time.Duration) (Learned, uint64, bool) {
	v := Learned{Rate: rate, Window: window, At: now}
	switch {
	case !k.on:
		return v, 0, false
	case k.v.At.IsZero(): // nothing learned yet: the ceiling is no news
		return v, k.starts, v.Rate < k.ceiling || v.Window > 0
	case v.Rate != k.v.Rate || v.Window != k.v.Window:
		return v, k.starts, true
	}
	return v, k.starts, k.starts > k.saved && now.Sub(k.v.At) >= KeepRefresh
}

// Saved records that v was saved when the lane had made starts starts.
func (k *Kept) Saved(v Learned, starts uint64) { k.v, k.saved = v, starts }

// Restore reports whether v, read at now, is to become the lane's rate, and
// the value to use: only when adaptive, for a sane value not older than
// LearnedMaxAge and newer than the lane's own, its rate capped by the
// ceiling and no lower than KeptFloor of it. A value used is recorded as
// the lane's own.
func (k *Kept) Restore(v Learned, now time.Time) (Learned, bool) {
	if !k.on || !(v.Rate > 0) || math.IsInf(v.Rate, 0) || v.Window < 0 ||
		now.Sub(v.At) > LearnedMaxAge || !v.At.After(k.v.At) {
		return v, false
	}
	v.Rate = min(max(v.Rate, KeptFloor*k.ceiling), k.ceiling)
	k.v, k.saved = v, k.starts
	return v, true
}

// Takeover reports whether jobs handed to the lane at now, whose last start
// took slot last (zero = none), call for reading the kept value: another
// instance may have drained until now. It is the caller's to then ask
// (Asking) or go on.
func (k *Kept) Takeover(now, last time.Time) bool {
	return k.on && !k.restoring &&
		(last.IsZero() || now.Sub(last) >= TakeoverGap) && (k.asked.IsZero() || now.Sub(k.asked) >= TakeoverGap)
}

// Asking records that the kept value is being read at now for a takeover:
// the lane's starts are held until Answered.
func (k *Kept) Asking(now time.Time) { k.restoring, k.asked = true, now }

// Answered ends the hold of a takeover read.
func (k *Kept) Answered() { k.restoring = false }

// Asked records that the kept value was read at now (not a takeover).
func (k *Kept) Asked(now time.Time) { k.asked = now }
