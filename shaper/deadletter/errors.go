package deadletter

import "errors"

// ErrNotFound is returned for a downstream or sequence the store does
// not hold.
var ErrNotFound = errors.New("deadletter: dead letter not found")

// ErrNoJetStream reports that the NATS server (or the account) has no
// JetStream: dead letters are then only published to their subjects, not
// stored, so there is nothing to list or replay. Store.Ensure and Put
// report it, StoreError wraps it around a store's answer that means it,
// the replay plans wrap it, and the daemon answers the dead-letter routes
// with it.
var ErrNoJetStream = errors.New("deadletter: the NATS server has no JetStream, so dead letters are only published to their subjects, not stored")

// ErrIncompatible is reported by Store.Ensure for an existing stream of a
// dead-letter stream's name whose retention, storage, replicas or discard
// policy the store cannot use; such a stream is never changed.
var ErrIncompatible = errors.New("deadletter: incompatible stream")

// ErrNotStarted answers a replay asked for before the daemon runs.
var ErrNotStarted = errors.New("the daemon is starting; try again in a moment")

// errTakenOver is save's answer when the stored plan is no longer the
// caller's.
var errTakenOver = errors.New("replay plan replaced by a newer request or another instance")
