package policy

import (
	"math"
	"time"
)

// Adaptive drain rate (rate_control: adaptive): the configured rate becomes
// a ceiling, and the lane runs at an effective rate steered by the
// downstream's answers. A refusal is a 429 or 503 (a PushedBack or an
// Overloaded answer).
//
//   - Episodes: a refusal opens an episode and cuts the rate once. The
//     downstream remembers what it was sent for a while (a window, a
//     sliding log, a token bucket's debt), so refusals keep coming back
//     after the cut for tries the new rate is not to blame for: a refusal
//     of a try started before the episode's quiet point (the cut plus the
//     downstream's memory) is an echo and cuts nothing. The memory is
//     learned: from a Retry-After (the episode lasts at least that long,
//     and the window is the wait plus the time since the last pause
//     ended), and from the refusal run (when every try since the cut was
//     refused up to the quiet point, the episode is stretched once to
//     twice as long). It starts at adaptMemory and is at most
//     adaptMemoryMax. Only one thing cuts again inside an episode: tries
//     started in its second half refused in a share above adaptTooHigh
//     (at least adaptTooHighMin of them) while others succeed — the new
//     rate itself is too high (the capacity fell).
//   - The cut: when the downstream delivered (successes counted by answer
//     time over its memory) less than adaptNear of the rate, the rate
//     drops to adaptCut of that delivered rate — what it really admits,
//     whatever its shape — but at most by half; when it delivered about
//     what was sent (a refusal at the margin: jitter at a concurrency
//     limit, a probe just past capacity), to adaptCut of the rate. The
//     delivered rate is remembered as the last good rate, unless it was
//     under half the rate (a failing downstream, not a limit).
//   - Recovery: after a round of successes of tries started after the
//     quiet point (adaptRound of them at the current rate, at least
//     adaptRoundMin) the rate rises. Far below the last good rate (under
//     adaptNear of it) it rises fast, ×adaptFast per round up to it; near
//     and above it, by a step that starts at adaptProbe of it after a cut
//     and doubles per round: it probes gently first, and finds capacity
//     that grew within seconds.
//   - In flight: a cut also notes how many tries were still in flight
//     when the refusal came back; that many (if any) become the lane's
//     limit in flight, below its concurrency, so a downstream that
//     refuses beyond N at once (a concurrency limit) is not sent N+1
//     however its answers jitter. Every adaptLimitRounds rounds of
//     successes raise it by one, until it reaches the concurrency and is
//     dropped.
//   - The rate stays between adaptFloor of the ceiling and the ceiling:
//     the configured rate, or an advertised quota ÷ window when lower
//     (see Adaptive.ceiling).
//
// The effective rate is exported as shaper_drain_rate_per_second, the
// ceiling as shaper_drain_rate_configured_per_second, the cuts as
// shaper_drain_rate_decreases_total. It is scheduler-side, so it works on
// every queue backend.
const (
	adaptCut         = 0.95
	adaptMaxCut      = 0.5
	adaptFloor       = 0.05
	adaptRound       = 500 * time.Millisecond
	adaptRoundMin    = 5
	adaptNear        = 0.9
	adaptFast        = 1.5
	adaptProbe       = 0.01
	adaptMemory      = time.Second
	adaptMemoryMax   = 30 * time.Second
	adaptTooHigh     = 0.2
	adaptTooHighMin  = 5
	adaptTooHighSpan = 200 * time.Millisecond // least span a second cut measures
	adaptLimitRounds = 4
)

// AdaptiveSettings configure an Adaptive controller.
type AdaptiveSettings struct {
	// On turns the controller on; off, it caps nothing and books nothing.
	On bool
	// Ceiling is the configured rate in starts per second (> 0).
	Ceiling float64
	// Concurrency is the lane's concurrency; a learned limit in flight is
	// below it.
	Concurrency int
}

// Adaptive is a lane's adaptive rate controller (see the constants above).
// Its Gate caps the rate at the effective rate and, after a cut, the tries
// in flight at the learned limit; Finished reports RateCut each time it
// cuts the rate. The zero value is off. Not safe for concurrent use (the
// lane's lock guards it).
type Adaptive struct {
	set   AdaptiveSettings
	rate  float64 // the effective rate; the configured rate while off
	st    adaptiveState
	quota quotaCap // the advertised limit ÷ window, which caps the ceiling
}

// adaptiveState is what the controller learned; the zero value never cut.
type adaptiveState struct {
	good    float64       // the delivered rate at the last cut; 0 = never cut
	cut     time.Time     // when the rate was last cut
	quiet   time.Time     // refusals of tries started before it are echoes
	memory  time.Duration // how long the downstream remembers; 0 = adaptMemory
	stretch bool          // this episode was stretched by its refusal run
	broke   bool          // a try started after the cut succeeded
	judge   time.Time     // tries started after it judge the new rate
	okAfter int           // successes of tries started after judge
	noAfter int           // refusals of tries started after judge
	echo    time.Time     // when the last echo was refused
	resumed time.Time     // when the last pushback pause ended (or ends)
	run     int           // successes since the rate last rose (tries after quiet)
	probe   float64       // the next step near or above good, as a share of it
	limit   int           // learned limit in flight; 0 = none
	rounds  int           // rounds since the limit last rose
	ring    *answerRing   // successes by answer time; nil until the first
}

// Configure applies new settings: off, or on for a new lane, the rate is
// the configured one and everything learned is forgotten; on, the current
// rate is kept, capped by the (possibly new) ceiling.
func (c *Adaptive) Configure(set AdaptiveSettings) {
	c.set = set
	if !set.On || c.rate <= 0 {
		c.st, c.rate = adaptiveState{}, set.Ceiling
		return
	}
	c.rate = min(c.rate, set.Ceiling)
}

// Rate is the effective rate in starts per second.
func (c *Adaptive) Rate() float64 { return c.rate }

// SetRate makes r the effective rate, as if the controller had learned it.
func (c *Adaptive) SetRate(r float64) { c.rate = r }

// Restore primes the controller with a kept rate and window (0 = unknown)
// at now, as if the rate had just been cut to rate: that is the last good
// rate to probe gently around, and answers to tries started before now are
// echoes that cut nothing.
func (c *Adaptive) Restore(rate float64, window time.Duration, now time.Time) {
	c.st = adaptiveState{good: rate, cut: now, quiet: now, judge: now, memory: window}
	c.rate = rate
}

// Window is the downstream's memory (its window) the controller learned
// from a Retry-After or a refusal run; 0 while it still uses the default.
func (c *Adaptive) Window() time.Duration { return c.st.memory }

// Memory is the downstream's memory the controller works with: the
// learned one, or adaptMemory.
func (c *Adaptive) Memory() time.Duration { return c.st.mem() }

// Gate caps the rate at the effective rate and the tries in flight at the
// learned limit, while on.
func (c *Adaptive) Gate(time.Time, int) Gate {
	if !c.set.On {
		return Gate{}
	}
	g := Gate{Rate: c.rate}
	if c.st.limit > 0 {
		g.Limit = min(c.st.limit, c.set.Concurrency)
	}
	return g
}

// Quiet reports whether the controller is off: Gate answers the zero Gate.
func (c *Adaptive) Quiet(time.Time) bool { return !c.set.On }

// Finished feeds one answer to the controller: an advertised quota caps
// the rate at the ceiling (learned even while off, as Advertised learns
// it), a success may complete a round (the rate rises), a refusal may cut
// (RateCut).
func (c *Adaptive) Finished(now time.Time, a Answer) Event {
	if a.Quota != nil {
		c.quota.learn(a.Quota)
	}
	if !c.set.On {
		return Event{}
	}
	if a.Quota != nil && c.rate > c.ceiling() {
		c.rate = c.ceiling()
	}
	switch a.Class {
	case Succeeded:
		if c.st.succeeded(a.Slot(), now, c.rate) {
			c.st.raiseLimit(c.set.Concurrency)
			c.rate = c.st.raise(c.rate, c.ceiling())
		}
	case PushedBack:
		return c.refused(a.Slot(), max(a.RetryAfter, 0), a.Inflight, now)
	case Overloaded:
		return c.refused(a.Slot(), 0, a.Inflight, now)
	}
	return Event{}
}

// ceiling is the most the controller may drain at: the configured rate,
// capped by an advertised quota ÷ window (never below the adaptive floor:
// the remaining count still holds the quota).
func (c *Adaptive) ceiling() float64 {
	if c.quota.cap <= 0 {
		return c.set.Ceiling
	}
	return min(c.set.Ceiling, max(c.quota.cap, adaptFloor*c.set.Ceiling))
}

// succeeded books a success of the try at slot and reports whether it
// completes a round (the rate may rise).
func (c *adaptiveState) succeeded(slot, now time.Time, rate float64) bool {
	c.answers().add(now)
	c.broke = c.broke || !slot.Before(c.cut)
	if !slot.Before(c.judge) {
		c.okAfter++
	}
	if slot.Before(c.quiet) {
		return false
	}
	c.run++
	if c.run < max(adaptRoundMin, int(math.Ceil(rate*adaptRound.Seconds()))) {
		return false
	}
	c.run = 0
	return true
}

// raise is the rate after a round of successes at rate r.
func (c *adaptiveState) raise(r, ceiling float64) float64 {
	switch {
	case c.good == 0:
		r *= adaptFast
	case r < adaptNear*c.good:
		r = min(r*adaptFast, c.good)
	default:
		r += c.probe * c.good
		c.probe *= 2
	}
	return min(r, ceiling)
}

// refused books a refusal of the try at slot; wait is its Retry-After
// (0 = none), inflight the tries still in flight. It reports RateCut when
// it cut the rate.
func (c *Adaptive) refused(slot time.Time, wait time.Duration, inflight int, now time.Time) Event {
	s := &c.st
	if !slot.Before(s.judge) {
		s.noAfter++
	}
	var ev Event
	switch {
	case slot.Before(s.quiet) && s.tooHigh():
		ev = c.cutRate(wait, max(now.Sub(s.judge), adaptTooHighSpan), inflight, now)
	case slot.Before(s.quiet):
		s.echo = now // an echo of the episode under way
	case !s.cut.IsZero() && !s.stretch && !s.broke && s.mem() < adaptMemoryMax:
		// Every try since the cut was refused: the downstream remembers
		// longer than we thought. Stretch the episode once.
		s.memory, s.stretch = min(2*s.mem(), adaptMemoryMax), true
		s.quiet, s.echo = later(s.quiet, s.cut.Add(s.memory)), now
		if !slot.Before(s.quiet) {
			ev = c.cutRate(wait, 0, inflight, now)
		}
	default:
		ev = c.cutRate(wait, 0, inflight, now)
	}
	if wait > 0 {
		s.resumed = later(s.resumed, now.Add(wait))
	}
	return ev
}

// tooHigh reports whether the tries started after the episode's first
// half (echoes of the old rate fade) show the new rate itself is above the
// downstream's capacity.
func (c *adaptiveState) tooHigh() bool {
	return c.noAfter >= adaptTooHighMin && c.okAfter > 0 &&
		float64(c.noAfter) > adaptTooHigh*float64(c.okAfter+c.noAfter)
}

// cutRate opens a refusal episode at now: the rate drops to adaptCut of
// what the downstream delivered over span (0 = s.window), and the tries
// still in flight become the limit in flight. It returns RateCut.
func (c *Adaptive) cutRate(wait, span time.Duration, inflight int, now time.Time) Event {
	s := &c.st
	if s.echo.Sub(s.cut) < s.mem()/2 {
		s.memory = max(adaptMemory, s.mem()/2) // the last episode's run was short
	}
	if span == 0 {
		span = s.window(wait, now)
	}
	r := c.rate
	delivered := s.answers().delivered(now, span)
	next := adaptCut * r
	if delivered < adaptNear*r {
		next = max(adaptCut*delivered, adaptMaxCut*r)
	}
	next = max(next, adaptFloor*c.set.Ceiling)
	if delivered > adaptMaxCut*r {
		// A limit, not a failure: what it delivered is what it admits. (An
		// outage delivers nothing and keeps the last good rate to return to.)
		s.good = max(min(delivered, r), next)
	}
	s.cut, s.quiet, s.echo = now, now.Add(max(s.mem(), wait)), now
	s.judge = now.Add(max(s.mem()/2, wait))
	s.stretch, s.broke, s.okAfter, s.noAfter, s.run, s.probe = false, false, 0, 0, 0, adaptProbe
	s.limit, s.rounds = inflight, 0 // none if nothing else was in flight
	if s.limit >= c.set.Concurrency {
		s.limit = 0
	}
	c.rate = next
	return Event{Kind: RateCut}
}

// window is the span a cut measures the delivered rate over: the
// downstream's memory; with a Retry-After (wait), its window — the wait
// plus how long its quota lasted since the last pause ended — which is
// learned as the memory.
func (c *adaptiveState) window(wait time.Duration, now time.Time) time.Duration {
	if wait <= 0 {
		return c.mem()
	}
	since := c.mem()
	if !c.resumed.IsZero() && now.Sub(c.resumed) < adaptMemoryMax {
		since = now.Sub(c.resumed)
	}
	c.memory = min(max(wait+since, adaptMemory), adaptMemoryMax)
	return c.memory
}

// raiseLimit raises the learned limit in flight after a round of
// successes, every adaptLimitRounds rounds; at concurrency it is dropped.
func (c *adaptiveState) raiseLimit(concurrency int) {
	if c.limit == 0 {
		return
	}
	if c.rounds++; c.rounds >= adaptLimitRounds {
		c.limit, c.rounds = c.limit+1, 0
	}
	if c.limit >= concurrency {
		c.limit = 0
	}
}

// mem is the downstream's learned memory.
func (c *adaptiveState) mem() time.Duration {
	if c.memory <= 0 {
		return adaptMemory
	}
	return c.memory
}

// answers is the ring of answers, made on first use.
func (c *adaptiveState) answers() *answerRing {
	if c.ring == nil {
		c.ring = &answerRing{}
	}
	return c.ring
}
