package outcome

import (
	"context"
	"time"
)

// Entry is one record to store, and how long the store keeps it once its
// job ended (its downstream's outcomes.keep).
type Entry struct {
	Record Record
	Keep   time.Duration
	// Max bounds a Memory store's records of the downstream (0: as it
	// was, at first DefaultMaxRecords); a shared store has its own room.
	Max int
}

// Store keeps the records of one or more downstreams. A Store is safe for
// concurrent use.
type Store interface {
	// Put stores entries, in order (a later record of a job replaces an
	// earlier one), and returns once they are stored.
	Put(ctx context.Context, entries []Entry) error
	// Get returns the record of job id of downstream; ok is false when
	// there is none (never seen, or past its keep).
	Get(ctx context.Context, downstream, id string) (rec Record, ok bool, err error)
}

// Teller tells a job's changes to those who listen: events, and the final
// outcome on the producer's reply subject. Its calls hand a message to the
// connection and do not wait for anyone.
type Teller interface {
	// Event publishes rec as the event of its state.
	Event(rec *Record) error
	// Outcome publishes rec's final outcome on subject.
	Outcome(subject string, rec *Record) error
}
