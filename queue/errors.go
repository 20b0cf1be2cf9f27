package queue

import (
	"errors"
	"fmt"
)

// ErrFull is reported by Offer when the queue has no room for the job's
// cost: its bound, or the store's (a durable kind), is reached.
var ErrFull = errors.New("queue: full")

// ErrMaxBytes is reported by Offer when the job's payload does not fit
// under the queue's byte bound (Settings.MaxBytes, or a durable kind's
// stream bound). It wraps ErrFull: errors.Is(err, ErrFull) holds too.
var ErrMaxBytes = fmt.Errorf("%w: max bytes reached", ErrFull)

// ErrKeyFull is reported by a durable kind's Offer under fairness when
// the job's key already holds its share of the queue (Settings.KeyCapacity,
// in jobs: the store bounds each key's jobs by count). It wraps ErrFull.
var ErrKeyFull = fmt.Errorf("%w: the key holds its queue.key_capacity", ErrFull)

// ErrNoSpace is reported by a durable kind's Offer when its store has no
// room left for the job (the server's or the account's storage limit, or
// the share of it the kind was given), as opposed to the queue's own
// bounds (ErrFull). It clears by itself once the store has room again.
var ErrNoSpace = errors.New("queue: the store is out of space")

// ErrDuplicate is reported by a durable kind's Offer when its store already
// holds a job with the same Job.DedupeID; the kind sets the job's ID to that
// job's id.
var ErrDuplicate = errors.New("queue: duplicate job")
