package natsout

import "errors"

// ErrIncompatible is reported by Store.Ensure and Store.EnsureEvents for
// an existing stream of the name they need whose retention, storage,
// replicas or discard policy they cannot use; such a stream is never
// changed.
var ErrIncompatible = errors.New("natsout: incompatible stream")

// ErrStarted is returned by a second Responder.Start, ErrStopped by a
// Start after Stop.
var (
	ErrStarted = errors.New("natsout: the responder already started; it starts once")
	ErrStopped = errors.New("natsout: the responder was stopped; it does not start again")
)
