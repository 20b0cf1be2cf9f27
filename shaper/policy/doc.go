// Package policy provides the controllers that decide when a lane may
// start its next try and how fast: each is a value of its own type behind
// one small interface, Policy, that the lane composes.
//
// A Policy observes the lane's tries (Started, Finished) and answers a
// Gate: start not before a time, at most a rate, at most so many in
// flight, or not at all until something happens. The lane asks every
// policy and takes the strictest answer of all (Strictest): the latest
// NotBefore, the lowest Rate and Limit, any Held. The lane alone owns its
// schedule; a policy never writes it, it only answers.
//
// The controllers:
//
//   - Pushback: a 429/503 with Retry-After pauses the lane.
//   - Advertised: rate-limit headers (RateLimit, X-RateLimit-*) hold starts
//     while the remaining quota is spent, and a used-up quota pauses the
//     lane until its reset (through Pushback).
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
//	func (h *HoldUntil) Started(time.Time, Try)           {}
//	func (h *HoldUntil) Finished(time.Time, Answer)       {}
//	func (h *HoldUntil) Gate(now time.Time, _ int) Gate { return Gate{NotBefore: h.At} }
//	func (h *HoldUntil) Quiet(last time.Time) bool      { return !h.At.After(last) }
//
// and in the lane (shaper/lane.go, newLane):
//
//	l.policies = []policy.Policy{&l.quota, &l.adaptive, &l.brk, &l.pushback, &l.pause, &l.kept, &l.hold}
//
// with a table test over fixed instants of its own.
package policy
