// Package shaper paces jobs from bounded per-downstream queues into their
// sinks at a constant rate (a leaky bucket), with optional per-key admission.
package shaper
