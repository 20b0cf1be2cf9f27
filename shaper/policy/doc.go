// Package policy provides the controllers that decide when a lane may
// start its next try and how fast: each is a value of its own type behind
// one small interface, Policy, that the lane composes.
//
// A Policy answers a Gate: start not before a time, at most a rate, at
// most so many in flight, or not at all until something happens. The lane
// asks every policy through their Set (Compose) and takes the strictest
// answer of all (Set.Gate): the latest NotBefore, the lowest Rate and
// Limit, any Held. The lane alone owns its schedule; a policy never writes
// it, it only answers. What only some policies do (book starts or
// answers, pause on another's behalf, forecast a start for the intake
// side, mark what the lane exports, show status) is an optional role,
// found once by Compose (roles.go); what a policy decides comes back as an
// Event the lane logs and counts. No policy holds a pointer to another or
// a func of the lane.
//
// The controllers:
//
//   - Pushback: a 429/503 with Retry-After pauses the lane.
//   - Advertised: rate-limit headers (RateLimit, X-RateLimit-*) hold starts
//     while the remaining quota is spent, and a used-up quota pauses the
//     lane until its reset (an Event the Set hands to Pushback).
//   - Adaptive: the drain rate under rate_control adaptive, cut on
//     refusals and raised after rounds of successes.
//   - Breaker: the circuit breaker, which holds jobs while a downstream
//     fails.
//   - Paused: the admin API's pause, which holds the lane until resumed
//     or, for a timed pause, until its end.
//   - Maintenance: recurring maintenance windows, which hold the lane's
//     starts inside each window.
//   - Kept: the rules of an adaptive lane's kept learned rate (when it is
//     due to be saved, when a kept value is used, when jobs handed over
//     call for reading it), and the hold while such a read is in flight.
//
// Every method is called under the lane's lock with the scheduler's or
// the delivery's time: policies read no clock and take no lock, so each is
// tested with fixed instants and no lane.
//
// # Adding a controller
//
// A controller is one new file and one line where the lane lists its
// policies. A controller that holds a lane until a fixed time:
//
//	// HoldUntil holds the lane's starts until At.
//	type HoldUntil struct{ At time.Time }
//
//	func (h *HoldUntil) Gate(now time.Time, _ int) Gate { return Gate{NotBefore: h.At} }
//	func (h *HoldUntil) Quiet(last time.Time) bool      { return !h.At.After(last) }
//
// and in the lane (shaper/policies.go, compose):
//
//	l.policies = policy.Compose(&l.quota, &l.adaptive, &l.brk, &l.pushback, &l.pause, &l.kept, &l.maint, &l.hold)
//
// with a table test over fixed instants of its own. A controller that
// books tries adds Started or Finished (and is found a Starter or a
// Finisher), and one the intake side must wait out adds Forecast.
package policy
