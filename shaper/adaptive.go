package shaper

import (
	"errors"
	"math"
	"time"

	"github.com/shaperd/shaper/queue"
)

// Adaptive drain rate (LaneSettings.Adaptive; rate_control: adaptive): the
// configured rate becomes a ceiling, and the lane runs at an effective rate
// steered by the downstream's answers. A refusal is a 429 or 503 (a
// *PushbackError or an *OverloadError).
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
//     (see lane.ceiling).
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

// OverloadError reports an answer meaning "too many requests" that carries
// no usable Retry-After (HTTP 429 or 503 without one). The lane retries it
// with backoff like any failure; under adaptive rate control it also cuts
// the rate.
type OverloadError struct{ Err error }

func (e *OverloadError) Error() string { return e.Err.Error() }
func (e *OverloadError) Unwrap() error { return e.Err }

// adaptive is a lane's adaptive rate controller. The zero value is a
// controller that never cut. Guarded by lane.mu.
type adaptive struct {
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

// reset returns the effective rate for cfg given the current one (0 for a
// new lane): the configured rate, or under Adaptive the current rate
// capped by the (possibly new) ceiling.
func (c *adaptive) reset(cfg LaneSettings, current float64) float64 {
	if !cfg.Adaptive || current <= 0 {
		*c = adaptive{}
		return cfg.Rate
	}
	return min(current, cfg.Rate)
}

// adapt feeds the outcome of one try to the controller. Requires l.mu.
func (l *lane) adapt(job *queue.Job, err error, now time.Time) {
	if !l.cfg.Adaptive {
		return
	}
	var pb *PushbackError
	var ov *OverloadError
	c := &l.ctl
	switch {
	case err == nil:
		if c.succeeded(job.Slot, now, l.rate) {
			c.raiseLimit(l.cfg.Concurrency)
			l.setRate(c.raise(l.rate, l.ceiling()))
		}
	case errors.As(err, &pb):
		l.refused(job.Slot, max(pb.RetryAfter, 0), now)
	case errors.As(err, &ov):
		l.refused(job.Slot, 0, now)
	}
}

// succeeded books a success of the try at slot and reports whether it
// completes a round (the rate may rise).
func (c *adaptive) succeeded(slot, now time.Time, rate float64) bool {
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
func (c *adaptive) raise(r, ceiling float64) float64 {
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
// (0 = none). Requires l.mu.
func (l *lane) refused(slot time.Time, wait time.Duration, now time.Time) {
	c := &l.ctl
	if !slot.Before(c.judge) {
		c.noAfter++
	}
	switch {
	case slot.Before(c.quiet) && c.tooHigh():
		l.cutRate(wait, max(now.Sub(c.judge), adaptTooHighSpan), now)
	case slot.Before(c.quiet):
		c.echo = now // an echo of the episode under way
	case !c.cut.IsZero() && !c.stretch && !c.broke && c.mem() < adaptMemoryMax:
		// Every try since the cut was refused: the downstream remembers
		// longer than we thought. Stretch the episode once.
		c.memory, c.stretch = min(2*c.mem(), adaptMemoryMax), true
		c.quiet, c.echo = later(c.quiet, c.cut.Add(c.memory)), now
		if !slot.Before(c.quiet) {
			l.cutRate(wait, 0, now)
		}
	default:
		l.cutRate(wait, 0, now)
	}
	if wait > 0 {
		c.resumed = later(c.resumed, now.Add(wait))
	}
}

// tooHigh reports whether the tries started after the episode's first
// half (echoes of the old rate fade) show the new rate itself is above the
// downstream's capacity.
func (c *adaptive) tooHigh() bool {
	return c.noAfter >= adaptTooHighMin && c.okAfter > 0 &&
		float64(c.noAfter) > adaptTooHigh*float64(c.okAfter+c.noAfter)
}

// cutRate opens a refusal episode at now: the rate drops to adaptCut of
// what the downstream delivered over span (0 = c.window), and the tries
// still in flight become the limit in flight. Requires l.mu.
func (l *lane) cutRate(wait, span time.Duration, now time.Time) {
	c := &l.ctl
	if c.echo.Sub(c.cut) < c.mem()/2 {
		c.memory = max(adaptMemory, c.mem()/2) // the last episode's run was short
	}
	if span == 0 {
		span = c.window(wait, now)
	}
	r := l.rate
	delivered := c.answers().delivered(now, span)
	next := adaptCut * r
	if delivered < adaptNear*r {
		next = max(adaptCut*delivered, adaptMaxCut*r)
	}
	next = max(next, adaptFloor*l.cfg.Rate)
	if delivered > adaptMaxCut*r {
		// A limit, not a failure: what it delivered is what it admits. (An
		// outage delivers nothing and keeps the last good rate to return to.)
		c.good = max(min(delivered, r), next)
	}
	c.cut, c.quiet, c.echo = now, now.Add(max(c.mem(), wait)), now
	c.judge = now.Add(max(c.mem()/2, wait))
	c.stretch, c.broke, c.okAfter, c.noAfter, c.run, c.probe = false, false, 0, 0, 0, adaptProbe
	c.limit, c.rounds = l.inflight, 0 // none if nothing else was in flight
	if c.limit >= l.cfg.Concurrency {
		c.limit = 0
	}
	l.m.rateCuts.Inc()
	l.setRate(next)
}

// window is the span a cut measures the delivered rate over: the
// downstream's memory; with a Retry-After (wait), its window — the wait
// plus how long its quota lasted since the last pause ended — which is
// learned as the memory.
func (c *adaptive) window(wait time.Duration, now time.Time) time.Duration {
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
func (c *adaptive) raiseLimit(concurrency int) {
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

// maxInflight is how many tries the lane may have in flight: its
// concurrency, or the adaptive controller's learned limit when lower.
// Requires l.mu.
func (l *lane) maxInflight() int {
	if l.cfg.Adaptive && l.ctl.limit > 0 {
		return min(l.ctl.limit, l.cfg.Concurrency)
	}
	return l.cfg.Concurrency
}

// mem is the downstream's learned memory.
func (c *adaptive) mem() time.Duration {
	if c.memory <= 0 {
		return adaptMemory
	}
	return c.memory
}

// answers is the ring of answers, made on first use.
func (c *adaptive) answers() *answerRing {
	if c.ring == nil {
		c.ring = &answerRing{}
	}
	return c.ring
}

// answerRing counts successes per ringWidth over the last ringLen widths
// (32 s, enough for adaptMemoryMax). The zero value is empty.
type answerRing struct {
	head int64 // number of the newest bucket (unix time / ringWidth)
	ok   [ringLen]uint32
}

const (
	ringWidth = 100 * time.Millisecond
	ringLen   = 320
)

func (r *answerRing) add(now time.Time) {
	b := now.UnixNano() / int64(ringWidth)
	r.advance(b)
	r.ok[b%ringLen]++
}

// advance makes bucket b the newest, emptying those it passes.
func (r *answerRing) advance(b int64) {
	if b <= r.head {
		return
	}
	for i := max(r.head+1, b-ringLen+1); i <= b; i++ {
		r.ok[i%ringLen] = 0
	}
	r.head = b
}

// delivered is the successes per second answered over the span before
// now (at most the ring's length), the oldest bucket counted pro rata.
func (r *answerRing) delivered(now time.Time, span time.Duration) float64 {
	ns := now.UnixNano()
	b := ns / int64(ringWidth)
	r.advance(b)
	span = min(span, (ringLen-1)*ringWidth)
	n := int64(span / ringWidth)
	ok := 0.0
	for i := b; i > b-n && i > r.head-ringLen; i-- {
		ok += float64(r.ok[i%ringLen])
	}
	if old := b - n; old > r.head-ringLen {
		part := 1 - float64(ns%int64(ringWidth))/float64(ringWidth) // of the oldest bucket, inside
		ok += float64(r.ok[old%ringLen]) * part
	}
	return ok / span.Seconds()
}
