package natskv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults for zero fields of Settings.
const (
	DefaultBucket         = "SHAPER_ADMISSION"
	DefaultTimeout        = 250 * time.Millisecond
	DefaultMaxTries       = 1000
	DefaultSyncInterval   = 100 * time.Millisecond
	DefaultMaxKeys        = 100_000
	DefaultLimitMarkerTTL = time.Second
)

// Settings configure a Store; zero fields take the defaults.
type Settings struct {
	Bucket   string        // KV bucket name; "" = DefaultBucket
	Replicas int           // bucket replicas; 0 = 1
	Storage  string        // "file" (default) or "memory"
	Timeout  time.Duration // bound of one decision's reads, writes and retries; 0 = DefaultTimeout
	// MaxTries caps the compare-and-swap tries of one decision; 0 =
	// DefaultMaxTries. Tries normally end well before it, at Timeout: a
	// decision keeps retrying a conflicting write until its deadline, so a
	// hot key shared by several instances stays exact under contention and
	// falls to the fail policy only when the store is really too slow.
	MaxTries int
	// SyncInterval is approximate mode's reconciliation period; 0 =
	// DefaultSyncInterval.
	SyncInterval time.Duration
	// MaxKeys caps, per limiter, the keys cached (exact mode) or held
	// locally (approximate mode); 0 = DefaultMaxKeys.
	MaxKeys int
	Metrics *Metrics     // nil = record nothing
	Logger  *slog.Logger // nil = discard
}

func (s Settings) withDefaults() Settings {
	if s.Bucket == "" {
		s.Bucket = DefaultBucket
	}
	s.Replicas = max(s.Replicas, 1)
	if s.Storage == "" {
		s.Storage = "file"
	}
	if s.Timeout <= 0 {
		s.Timeout = DefaultTimeout
	}
	if s.MaxTries <= 0 {
		s.MaxTries = DefaultMaxTries
	}
	if s.SyncInterval <= 0 {
		s.SyncInterval = DefaultSyncInterval
	}
	if s.MaxKeys <= 0 {
		s.MaxKeys = DefaultMaxKeys
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	return s
}

// Store is one bucket of admission state on one NATS connection, shared by
// the limiters it makes. Create it with New; Close stops every limiter's
// background work. Safe for concurrent use.
type Store struct {
	set    Settings
	js     jetstream.JetStream
	pre    string // "$KV.<bucket>."
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool

	mu       sync.Mutex
	stream   jetstream.Stream // nil until the bucket was found or created
	lastTry  time.Time        // last attempt to find or create it
	lastWarn atomic.Int64     // Unix ns of the last fail-open warning
}

// New returns a store on nc. It does no I/O: the bucket is created or
// checked by Ensure, or on first use.
func New(nc *nats.Conn, set Settings) (*Store, error) {
	set = set.withDefaults()
	if !validBucket(set.Bucket) {
		return nil, fmt.Errorf("natskv: %q is not a bucket name; use letters, digits, - and _", set.Bucket)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("natskv: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Store{set: set, js: js, pre: "$KV." + set.Bucket + ".", ctx: ctx, cancel: cancel}, nil
}

func validBucket(b string) bool {
	if b == "" {
		return false
	}
	for _, r := range b {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// Bucket returns the bucket's name.
func (st *Store) Bucket() string { return st.set.Bucket }

// Close stops the background work of every limiter of st and waits for it.
// Decisions after Close fail as store errors. Idempotent.
func (st *Store) Close() error {
	if !st.closed.CompareAndSwap(false, true) {
		return nil
	}
	st.cancel()
	st.wg.Wait()
	return nil
}

// Ensure creates the bucket, or checks an existing one: one without
// per-message TTLs is an ErrIncompatible. Decisions call it lazily (at most
// once a second while the bucket is missing); calling it at start-up
// surfaces a problem early.
func (st *Store) Ensure(ctx context.Context) error {
	_, err := st.ensure(ctx)
	return err
}

func (st *Store) ensure(ctx context.Context) (jetstream.Stream, error) {
	cfg := jetstream.KeyValueConfig{
		Bucket:         st.set.Bucket,
		Description:    "shaperd admission state: one key per (downstream, hashed admission key), expiring when idle",
		History:        1,
		Replicas:       st.set.Replicas,
		Storage:        jetstream.FileStorage,
		LimitMarkerTTL: DefaultLimitMarkerTTL,
	}
	if st.set.Storage == "memory" {
		cfg.Storage = jetstream.MemoryStorage
	}
	kv, err := st.js.KeyValue(ctx, st.set.Bucket)
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound):
		if _, err = st.js.CreateKeyValue(ctx, cfg); err != nil && !errors.Is(err, jetstream.ErrBucketExists) {
			return nil, fmt.Errorf("create admission bucket %s: %w", st.set.Bucket, err)
		}
		st.set.Logger.Info("admission bucket created", "bucket", st.set.Bucket, "replicas", cfg.Replicas, "storage", cfg.Storage.String())
	case err != nil:
		return nil, fmt.Errorf("look up admission bucket %s: %w", st.set.Bucket, err)
	default:
		status, err := kv.Status(ctx)
		if err != nil {
			return nil, fmt.Errorf("admission bucket %s: %w", st.set.Bucket, err)
		}
		if status.(*jetstream.KeyValueBucketStatus).LimitMarkerTTL() <= 0 {
			return nil, fmt.Errorf("%w: bucket %s has no limit_marker_ttl, so its keys cannot expire; delete it (nats kv del %s) and let shaperd create it",
				ErrIncompatible, st.set.Bucket, st.set.Bucket)
		}
	}
	s, err := st.js.Stream(ctx, "KV_"+st.set.Bucket)
	if err != nil {
		return nil, fmt.Errorf("admission bucket %s: %w", st.set.Bucket, err)
	}
	st.mu.Lock()
	st.stream = s
	st.mu.Unlock()
	return s, nil
}

// bucket returns the bucket's stream, finding or creating it at most once
// a second while it is missing.
func (st *Store) bucket(ctx context.Context) (jetstream.Stream, error) {
	st.mu.Lock()
	s := st.stream
	if s != nil {
		st.mu.Unlock()
		return s, nil
	}
	if time.Since(st.lastTry) < time.Second {
		st.mu.Unlock()
		return nil, fmt.Errorf("admission bucket %s not available yet", st.set.Bucket)
	}
	st.lastTry = time.Now()
	st.mu.Unlock()
	return st.ensure(ctx)
}

// forget drops the cached stream after an error that says it is gone (or
// JetStream is), so that the next decisions fail fast and bucket looks for
// it again once a second.
func (st *Store) forget(err error) {
	if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		st.mu.Lock()
		st.stream = nil
		st.mu.Unlock()
	}
}

// subject returns the KV key of (downstream, key): the key is hashed, so it
// never appears in a subject and may hold any bytes.
func subject(downstream, key string) string {
	h := sha256.New()
	h.Write([]byte(downstream))
	h.Write([]byte{0})
	h.Write([]byte(key))
	var sum [sha256.Size]byte
	return downstream + "." + hex.EncodeToString(h.Sum(sum[:0])[:16])
}

// read returns the stored value of KV key k and the revision to write
// against. An absent or deleted key (or an expiry marker) gives a nil
// value; its revision is that of the marker, or 0.
func (st *Store) read(ctx context.Context, k string) (val []byte, rev uint64, err error) {
	s, err := st.bucket(ctx)
	if err != nil {
		return nil, 0, err
	}
	m, err := s.GetLastMsgForSubject(ctx, st.pre+k)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return nil, 0, nil
	case err != nil:
		st.forget(err)
		return nil, 0, err
	}
	if len(m.Header) > 0 && (m.Header.Get("KV-Operation") != "" || m.Header.Get(jetstream.MarkerReasonHeader) != "") {
		return nil, m.Sequence, nil
	}
	return m.Data, m.Sequence, nil
}

// write stores val under KV key k if k's last revision is still rev,
// expiring after ttl. conflict reports a lost compare-and-swap.
func (st *Store) write(ctx context.Context, k string, rev uint64, val []byte, ttl time.Duration) (newRev uint64, conflict bool, err error) {
	m := &nats.Msg{Subject: st.pre + k, Data: val, Header: nats.Header{}}
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(rev, 10))
	m.Header.Set(jetstream.MsgTTLHeader, strconv.FormatInt(int64(ttl/time.Second), 10)+"s")
	ack, err := st.js.PublishMsg(ctx, m, jetstream.WithRetryAttempts(0))
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return 0, true, nil
		}
		st.forget(err)
		return 0, false, err
	}
	return ack.Sequence, false, nil
}
