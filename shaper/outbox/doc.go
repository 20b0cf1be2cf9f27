// Package outbox provides Outbox, which hands items to a slow or failing
// consumer from one goroutine, in order per key, so that whoever adds an
// item never waits on the consumer (the shaper's dead letters: neither the
// scheduler nor a lane's lock waits on the dead-letter store).
//
// An item the consumer refuses stays at the front of its key's backlog,
// and the whole backlog waits (the consumer is likely down for all of
// them), doubling from RetryFirst to RetryMax. Close lets Run return once
// every backlog is empty; cancelling Run's ctx abandons what is left.
package outbox
