// Package dedupe provides the table that keeps a job from being queued
// twice for one producer message id: it remembers, for a fixed window, the
// job id given to each accepted id, and lets copies of an id whose first
// copy is still being decided wait for that copy's answer. It knows nothing
// of NATS or of the shaper's types: the answer is a type parameter.
package dedupe
