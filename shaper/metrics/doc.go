// Package metrics provides the Prometheus collectors a Shaper exports: the
// jobs received, accepted, rejected, dropped and delivered per downstream,
// the queues' depth, capacity and wait, the drain rate, and the series of
// the lanes' policies (shadow rejections, adaptive cuts, the breaker).
//
// Every label value comes from a set the config bounds: the configured
// downstream names (anything else is counted under Labels.Unknown) and the
// fixed reasons and outcomes, which package shaper defines with their types
// and hands to New in Labels. A lane resolves its series once (ForLane) so
// its hot path does no label lookups, and Forget deletes them when the
// last lane of that name is gone. What every start or answer would
// change (tries started and succeeded, in flight, the queue's depth and
// its levels) is read from the lanes when scraped instead of written.
//
// The package imports client_golang and the standard library only.
package metrics
