package jetstream

import "errors"

// ErrIncompatible reports an existing stream or consumer whose settings the
// queue cannot use; it is never changed automatically.
var ErrIncompatible = errors.New("jetstream: existing stream is incompatible")

// ErrRecordsLoading reports that the dedupe records are not all in memory
// yet (start-up, or after a reconnection to NATS).
var ErrRecordsLoading = errors.New("jetstream: dedupe records not loaded yet")

// Errors of a store that got no PubAck.
var (
	// errAckTimeout: the store sent no PubAck within ackTimeout. The job
	// may have been stored.
	errAckTimeout = errors.New("jetstream: the store's acknowledgement did not come in time")
	// errStalled: MaxPending stores awaited their PubAck for stallWait.
	errStalled = errors.New("jetstream: too many stores await their acknowledgement")
)
