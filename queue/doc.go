// Package queue provides the queued Job and every queue kind behind one
// interface, Queue: Bucket, the leaky bucket's bounded FIFO (bounded by the
// cost it holds, retries first once their backoff has passed), and Fair,
// deficit round robin between admission keys inside the same bound. The
// durable kind lives in queue/jetstream. Offer never blocks: a full queue
// refuses with ErrFull. Nothing here starts a goroutine or reads a clock;
// the owning lane's lock serialises every call.
package queue
