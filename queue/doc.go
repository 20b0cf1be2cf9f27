// Package queue provides Bucket, a bounded FIFO ring buffer used as the
// leaky bucket's queue: Offer refuses at capacity instead of blocking, and
// nothing in the package starts goroutines or reads a clock.
package queue
