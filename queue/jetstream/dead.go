package jetstream

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
)

// The dead-letter store (SPEC.md "Dead letters are kept"): one stream per
// downstream, <StreamPrefix>_DEAD_<downstream>, bound to the downstream's
// dead-letter subject, file storage (Settings.Storage), limits retention,
// discard old, bounded by DeadSettings.MaxAge and MaxMsgs. A dead letter is
// a message on the subject: the original payload, the producer's headers
// and the Shaper-* headers (Shaper-Reason, Shaper-Error, Shaper-Job-Id,
// Shaper-Downstream, Shaper-Attempt). Core subscribers on the subject still
// receive every dead letter.
//
// STUB: the API below is the contract other parts are written against; the
// implementation is in progress.

// ErrDeadNotFound is returned for a downstream or sequence the store does
// not hold.
var ErrDeadNotFound = errors.New("jetstream: dead letter not found")

// ErrNoJetStream is reported by DeadStore.Ensure when the NATS server (or
// the account) has no JetStream: dead letters are then only published.
var ErrNoJetStream = errors.New("jetstream: the NATS server has no JetStream")

// errDeadNotYet marks the stub.
var errDeadNotYet = errors.New("jetstream: dead-letter store not implemented yet")

// DeadSettings bound one downstream's dead-letter stream.
type DeadSettings struct {
	Downstream string
	Subject    string        // the downstream's dead-letter subject
	MaxAge     time.Duration // older dead letters are discarded
	MaxMsgs    int           // past this many the oldest is discarded
}

// DeadLetter is one stored dead letter.
type DeadLetter struct {
	Seq    uint64 // the stream sequence: its id in the admin API
	Time   time.Time
	Header nats.Header
	Data   []byte
	Size   int // payload bytes (Data may be nil when listed without payloads)
}

// DeadFilter selects dead letters, oldest first.
type DeadFilter struct {
	Reason string // "" = any; else the Shaper-Reason header's value
	Limit  int    // at most this many; 0 = no limit
	After  uint64 // only sequences above this
}

// DeadStats summarise one downstream's stored dead letters.
type DeadStats struct {
	Count  int
	Oldest time.Time // zero when empty
	// Discarded counts dead letters the stream's limits discarded (the
	// oldest first) since this process started.
	Discarded uint64
}

// DeadStore keeps dead letters in JetStream. Create it with Store.Dead.
// Safe for concurrent use; every method does I/O bounded by ctx.
type DeadStore struct {
	st *Store
}

// Dead returns the store's dead-letter side.
func (st *Store) Dead() *DeadStore { return &DeadStore{st: st} }

// Ensure creates or updates the dead-letter stream of every downstream in
// ds (limits and subject are updated in place), returning every problem at
// once. It reports an error wrapping ErrNoJetStream when the server has no
// JetStream.
func (d *DeadStore) Ensure(ctx context.Context, ds []DeadSettings) error { return errDeadNotYet }

// Put stores m (a dead letter for downstream, addressed to its subject) and
// returns its sequence once the stream acknowledged it.
func (d *DeadStore) Put(ctx context.Context, downstream string, m *nats.Msg) (uint64, error) {
	return 0, errDeadNotYet
}

// List returns downstream's dead letters matching f, oldest first, without
// payloads, and how many match in all (ignoring f.Limit).
func (d *DeadStore) List(ctx context.Context, downstream string, f DeadFilter) ([]DeadLetter, int, error) {
	return nil, 0, errDeadNotYet
}

// Get returns one dead letter with its payload, or ErrDeadNotFound.
func (d *DeadStore) Get(ctx context.Context, downstream string, seq uint64) (DeadLetter, error) {
	return DeadLetter{}, errDeadNotYet
}

// Delete removes one dead letter, or returns ErrDeadNotFound.
func (d *DeadStore) Delete(ctx context.Context, downstream string, seq uint64) error {
	return errDeadNotYet
}

// Purge removes every dead letter of downstream.
func (d *DeadStore) Purge(ctx context.Context, downstream string) error { return errDeadNotYet }

// Stats reports downstream's stored dead letters.
func (d *DeadStore) Stats(ctx context.Context, downstream string) (DeadStats, error) {
	return DeadStats{}, errDeadNotYet
}
