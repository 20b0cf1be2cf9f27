package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
)

// The ledger of hand-backs: deliveries of a job that were not tries. A
// job's delivery count (NumDelivered) counts every delivery, and a job may
// be delivered without being tried: a delayed job fetched long before its
// instant is handed back to wait in the stream (a delay nak), and a job
// fetched but not started is handed back at a graceful stop. Each such
// delivery is counted here, in the bucket <StreamPrefix>_HANDBACKS (a NATS
// KV layout), under the key <stream>.<sequence>, before its nak is sent;
// a job's tries are its deliveries less its hand-backs. The ledger is
// read only for a message delivered more than once, in the fetcher (never
// under the queue's lock), and its entry is deleted (the message of the
// bucket's stream, by sequence: no delete marker stays) once the job
// leaves the queue's stream. Its value is "<count> <stored>", stored being
// the job's stream timestamp in unix nanoseconds, so an entry outliving a
// deleted and recreated stream (whose sequences start again) is never
// taken for a new job's.
const (
	handbacksSuffix = "_HANDBACKS"
	ledgerTimeout   = 2 * time.Second // one read or write of the ledger
)

// ledgerEntry is what the ledger holds for one job.
type ledgerEntry struct {
	count int    // deliveries that were not tries
	rev   uint64 // the entry's sequence in the bucket's stream; 0 = unknown
}

// ledgerStore is the Store's handle on the bucket, found or created once.
type ledgerStore struct {
	mu     sync.Mutex
	kv     natsjs.KeyValue
	stream natsjs.Stream
}

// HandbackBucket returns the name of the ledger's bucket.
func (st *Store) HandbackBucket() string { return st.set.StreamPrefix + handbacksSuffix }

// handbacks finds or creates the ledger's bucket (as the other buckets
// are: another instance may create it first) and keeps its handles.
func (st *Store) handbacks(ctx context.Context) (natsjs.KeyValue, natsjs.Stream, error) {
	l := &st.ledger
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kv != nil {
		return l.kv, l.stream, nil
	}
	cfg := st.ledgerConfig()
	s, err := st.js.Stream(ctx, cfg.Name)
	if errors.Is(err, natsjs.ErrStreamNotFound) {
		s, err = st.js.CreateStream(ctx, cfg)
		if errors.Is(err, natsjs.ErrStreamNameAlreadyInUse) {
			s, err = st.js.Stream(ctx, cfg.Name)
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("ledger bucket %s: %w", st.HandbackBucket(), err)
	}
	kv, err := st.js.KeyValue(ctx, st.HandbackBucket())
	if err != nil {
		return nil, nil, fmt.Errorf("ledger bucket %s: %w", st.HandbackBucket(), err)
	}
	l.kv, l.stream = kv, s
	return kv, s, nil
}

// ledgerConfig is the ledger's stream: a NATS KV bucket's layout (one
// value per key, direct gets), created as a stream, as the records' is,
// because a bucket made by the KV API denies deleting a message, and an
// entry is deleted by its sequence so that no delete marker stays.
func (st *Store) ledgerConfig() natsjs.StreamConfig {
	storage := st.storage()
	return natsjs.StreamConfig{
		Name:              kvStreamPre + st.HandbackBucket(),
		Description:       "shaperd: deliveries of queued jobs that were not tries (delays, hand-backs at a stop)",
		Subjects:          []string{kvSubjectPre + st.HandbackBucket() + ".>"},
		Storage:           storage,
		Replicas:          st.set.Replicas,
		MaxMsgsPerSubject: 1,
		Discard:           natsjs.DiscardOld,
		AllowRollup:       true,
		AllowDirect:       true,
	}
}

// ledgerKey is the key of the job at seq in stream.
func ledgerKey(stream string, seq uint64) string {
	return stream + "." + strconv.FormatUint(seq, 10)
}

// ledgerGet reads the hand-backs of the job at seq in stream, stored at
// stored. A job without an entry, with one of another job (stored at
// another instant), or whose entry cannot be read has none: its
// deliveries count as tries, the conservative side.
func (st *Store) ledgerGet(ctx context.Context, stream string, seq uint64, stored time.Time) (ledgerEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	kv, _, err := st.handbacks(ctx)
	if err != nil {
		return ledgerEntry{}, err
	}
	e, err := kv.Get(ctx, ledgerKey(stream, seq))
	switch {
	case errors.Is(err, natsjs.ErrKeyNotFound):
		return ledgerEntry{}, nil
	case err != nil:
		return ledgerEntry{}, fmt.Errorf("read ledger of %s: %w", ledgerKey(stream, seq), err)
	}
	count, at, ok := strings.Cut(string(e.Value()), " ")
	n, err := strconv.Atoi(count)
	if !ok || err != nil || at != strconv.FormatInt(stored.UnixNano(), 10) {
		return ledgerEntry{rev: e.Revision()}, nil // another job's: none of this one's
	}
	return ledgerEntry{count: n, rev: e.Revision()}, nil
}

// ledgerPut stores count hand-backs for the job at seq in stream, stored
// at stored, and returns the entry.
func (st *Store) ledgerPut(ctx context.Context, stream string, seq uint64, stored time.Time, count int) (ledgerEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	kv, _, err := st.handbacks(ctx)
	if err != nil {
		return ledgerEntry{}, err
	}
	rev, err := kv.Put(ctx, ledgerKey(stream, seq), []byte(strconv.Itoa(count)+" "+strconv.FormatInt(stored.UnixNano(), 10)))
	if err != nil {
		return ledgerEntry{}, fmt.Errorf("write ledger of %s: %w", ledgerKey(stream, seq), err)
	}
	return ledgerEntry{count: count, rev: rev}, nil
}

// ledgerDelete deletes the entry at rev of the bucket's stream.
func (st *Store) ledgerDelete(ctx context.Context, rev uint64) error {
	ctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	_, s, err := st.handbacks(ctx)
	if err != nil {
		return err
	}
	if err := s.DeleteMsg(ctx, rev); err != nil && !errors.Is(err, natsjs.ErrMsgNotFound) {
		return fmt.Errorf("delete ledger entry %d: %w", rev, err)
	}
	return nil
}
