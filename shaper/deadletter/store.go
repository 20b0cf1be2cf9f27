package deadletter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/shaperd/shaper/queue/jetstream"
)

// The dead-letter store: one stream per downstream, <StreamPrefix>_DEAD_<downstream>, bound to the downstream's
// dead-letter subject, file storage (Settings.Storage), limits retention,
// discard old, bounded by StreamSettings.MaxAge and MaxMsgs. A dead letter is
// a message on the subject: the original payload, the producer's headers
// and the Shaper-* headers (Shaper-Reason, Shaper-Error, Shaper-Job-Id,
// Shaper-Downstream, Shaper-Attempt). Core subscribers on the subject still
// receive every dead letter.

// StoreSettings place the dead-letter streams; zero fields take the
// defaults.
type StoreSettings struct {
	StreamPrefix string       // stream of downstream D: <StreamPrefix>_DEAD_D; "" = SHAPER
	Replicas     int          // stream replicas; 0 = 1
	Storage      string       // "file" (default) or "memory"
	Logger       *slog.Logger // nil = discard
}

// StreamSettings bound one downstream's dead-letter stream.
type StreamSettings struct {
	Downstream string
	Subject    string        // the downstream's dead-letter subject
	MaxAge     time.Duration // older dead letters are discarded; 0 = no age bound
	MaxMsgs    int           // past this many the oldest is discarded; 0 = no count bound
	// MaxBytes is the room the dead letters keep in a bounded store: past
	// it the oldest are discarded, so the stream never refuses one for its
	// own bound. 0 = no byte bound.
	MaxBytes int64
}

// Stored is one stored dead letter.
type Stored struct {
	Seq    uint64 // the stream sequence: its id in the admin API
	Time   time.Time
	Header nats.Header
	Data   []byte
	Size   int // payload bytes (Data may be nil when listed without payloads)
}

// Filter selects dead letters, oldest first.
type Filter struct {
	Reason string // "" = any; else the Shaper-Reason header's value
	Limit  int    // at most this many; 0 = no limit
	After  uint64 // only sequences above this
}

// Stats summarise one downstream's stored dead letters.
type Stats struct {
	Count  int
	Oldest time.Time // zero when empty
	// Discarded counts dead letters the stream's limits discarded (the
	// oldest first) since this process started: every message the stream
	// no longer holds that this process did not remove itself (Delete,
	// Purge). Removals by another instance count here too.
	Discarded uint64
}

// Store keeps dead letters in JetStream. Create it with NewStore.
// Safe for concurrent use; every method does I/O bounded by ctx, except
// Register and StreamName.
type Store struct {
	nc  *nats.Conn
	js  natsjs.JetStream
	set StoreSettings
	log *slog.Logger

	mu      sync.Mutex
	streams map[string]*deadStream // by downstream
}

// deadStream is one downstream's dead-letter stream.
type deadStream struct {
	name string // the stream's

	mu  sync.Mutex // guards set and s
	set StreamSettings
	s   natsjs.Stream // nil until ensured

	// acctMu is held across the I/O of Delete, Purge and Stats, so that a
	// removal of this process's is booked before Stats sees it.
	acctMu sync.Mutex
	acct   discards
}

// NewStore prepares the dead-letter store on nc. It does no I/O.
func NewStore(nc *nats.Conn, s StoreSettings) (*Store, error) {
	if s.StreamPrefix == "" {
		s.StreamPrefix = "SHAPER"
	}
	s.Replicas = max(s.Replicas, 1)
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	js, err := natsjs.New(nc)
	if err != nil {
		return nil, fmt.Errorf("deadletter: %w", err)
	}
	return &Store{nc: nc, js: js, set: s, log: s.Logger, streams: map[string]*deadStream{}}, nil
}

// StreamName returns the stream that holds downstream's dead letters.
func (d *Store) StreamName(downstream string) string {
	return d.set.StreamPrefix + "_DEAD_" + downstream
}

// Register records the settings of every downstream in ds without I/O:
// Put creates a registered downstream's stream when it first finds it
// missing, so a daemon that started while NATS was unreachable still
// stores its dead letters once NATS is there. Registering again replaces
// the settings (Ensure applies them to the stream).
func (d *Store) Register(ds []StreamSettings) error {
	var errs []error
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range ds {
		if s.Downstream == "" || s.Subject == "" || s.MaxAge < 0 || s.MaxMsgs < 0 || s.MaxBytes < 0 {
			errs = append(errs, fmt.Errorf("deadletter: settings of %q: need a downstream and a subject, "+
				"and limits >= 0; got %+v", s.Downstream, s))
			continue
		}
		if ds := d.streams[s.Downstream]; ds != nil {
			ds.mu.Lock()
			ds.set = s
			ds.mu.Unlock()
			continue
		}
		d.streams[s.Downstream] = &deadStream{name: d.StreamName(s.Downstream), set: s}
	}
	return errors.Join(errs...)
}

// Ensure registers ds and creates or updates the dead-letter stream of
// every downstream in it (limits and subject are updated in place),
// returning every problem at once. It reports an error wrapping
// ErrNoJetStream when the server has no JetStream, and one wrapping
// ErrIncompatible for an existing stream it cannot use.
func (d *Store) Ensure(ctx context.Context, ds []StreamSettings) error {
	if err := d.Register(ds); err != nil {
		return err
	}
	if _, err := d.js.AccountInfo(ctx); err != nil {
		if noJetStream(err) {
			return fmt.Errorf("%w: %v", ErrNoJetStream, err)
		}
		return fmt.Errorf("deadletter: account info: %w", err)
	}
	var errs []error
	for _, s := range ds {
		st, err := d.lookup(s.Downstream)
		if err == nil {
			_, err = d.ensure(ctx, st)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// noJetStream reports an answer that means the server or account has no
// JetStream (nobody answers the JetStream API).
func noJetStream(err error) bool {
	return errors.Is(err, natsjs.ErrJetStreamNotEnabled) || errors.Is(err, natsjs.ErrJetStreamNotEnabledForAccount) ||
		errors.Is(err, nats.ErrNoResponders)
}

func (d *Store) lookup(downstream string) (*deadStream, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ds := d.streams[downstream]
	if ds == nil {
		return nil, fmt.Errorf("%w: downstream %q has no dead-letter store", ErrNotFound, downstream)
	}
	return ds, nil
}

// deadConfig is the stream that holds s's dead letters.
func (d *Store) deadConfig(s StreamSettings) natsjs.StreamConfig {
	storage := natsjs.FileStorage
	if d.set.Storage == "memory" {
		storage = natsjs.MemoryStorage
	}
	maxMsgs, maxBytes := int64(s.MaxMsgs), s.MaxBytes
	if maxMsgs == 0 {
		maxMsgs = -1
	}
	if maxBytes == 0 {
		maxBytes = -1
	}
	// Dead letters carry no Nats-Msg-Id, so the duplicate window does
	// nothing; the server wants it no longer than the max age.
	dups := time.Minute
	if s.MaxAge > 0 {
		dups = min(dups, s.MaxAge)
	}
	return natsjs.StreamConfig{
		Name:        d.StreamName(s.Downstream),
		Description: "shaperd dead letters of downstream " + s.Downstream,
		Subjects:    []string{s.Subject},
		Retention:   natsjs.LimitsPolicy,
		Storage:     storage,
		Replicas:    d.set.Replicas,
		MaxMsgs:     maxMsgs,
		MaxBytes:    maxBytes,
		MaxAge:      s.MaxAge,
		Discard:     natsjs.DiscardOld,
		Duplicates:  dups,
	}
}

// ensure creates ds's stream, or checks an existing one and updates its
// subject and limits to the settings.
func (d *Store) ensure(ctx context.Context, ds *deadStream) (natsjs.Stream, error) {
	ds.mu.Lock()
	set := ds.set
	ds.mu.Unlock()
	want := d.deadConfig(set)
	s, err := d.js.Stream(ctx, want.Name)
	switch {
	case errors.Is(err, natsjs.ErrStreamNotFound):
		if s, err = d.js.CreateStream(ctx, want); err != nil {
			return nil, fmt.Errorf("create dead-letter stream %s on %s: %w", want.Name, set.Subject, err)
		}
		d.log.Info("dead-letter stream created", "stream", want.Name, "subject", set.Subject,
			"max_msgs", want.MaxMsgs, "max_bytes", want.MaxBytes, "max_age", want.MaxAge, "storage", want.Storage.String())
	case err != nil && noJetStream(err):
		return nil, fmt.Errorf("%w: look up stream %s: %v", ErrNoJetStream, want.Name, err)
	case err != nil:
		return nil, fmt.Errorf("look up dead-letter stream %s: %w", want.Name, err)
	default:
		have := s.CachedInfo().Config
		if err := incompatible(have, want); err != nil { // the subject follows the config
			return nil, err
		}
		if have.MaxMsgs != want.MaxMsgs || have.MaxBytes != want.MaxBytes || have.MaxAge != want.MaxAge ||
			have.Duplicates != want.Duplicates || !slices.Equal(have.Subjects, want.Subjects) {
			upd := have
			upd.MaxMsgs, upd.MaxBytes, upd.MaxAge = want.MaxMsgs, want.MaxBytes, want.MaxAge
			upd.Duplicates, upd.Subjects = want.Duplicates, want.Subjects
			if s, err = jetstream.UpdateKeepingRoom(ctx, d.js, upd, have.MaxBytes, d.log, "dead letters"); err != nil {
				return nil, fmt.Errorf("update dead-letter stream %s (subject %s, max_msgs %d, max_bytes %d, max_age %s): %w",
					want.Name, set.Subject, want.MaxMsgs, want.MaxBytes, want.MaxAge, err)
			}
		}
	}
	ds.mu.Lock()
	ds.s = s
	ds.mu.Unlock()
	ds.acctMu.Lock()
	ds.acct.observe(s.CachedInfo())
	ds.acctMu.Unlock()
	return s, nil
}

// stream returns ds's stream handle, ensuring it if it never was.
func (d *Store) stream(ctx context.Context, downstream string) (*deadStream, natsjs.Stream, error) {
	ds, err := d.lookup(downstream)
	if err != nil {
		return nil, nil, err
	}
	ds.mu.Lock()
	s := ds.s
	ds.mu.Unlock()
	if s == nil {
		if s, err = d.ensure(ctx, ds); err != nil {
			return nil, nil, err
		}
	}
	return ds, s, nil
}

// Put stores m (a dead letter for downstream, addressed to its subject; an
// empty m.Subject is set to it) and returns its sequence once the stream
// acknowledged it. If the stream is missing (never created, or deleted) it
// is created and the publish tried once more. Put adds the
// Nats-Expected-Stream header to m.
func (d *Store) Put(ctx context.Context, downstream string, m *nats.Msg) (uint64, error) {
	ds, err := d.lookup(downstream)
	if err != nil {
		return 0, err
	}
	ds.mu.Lock()
	if m.Subject == "" {
		m.Subject = ds.set.Subject
	}
	ds.mu.Unlock()
	pa, err := d.publish(ctx, ds, m)
	if err == nil {
		return pa.Sequence, nil
	}
	if _, eerr := d.ensure(ctx, ds); eerr != nil {
		return 0, fmt.Errorf("store dead letter of %s in %s: %w (and: %w)", downstream, ds.name, err, eerr)
	}
	if pa, err = d.publish(ctx, ds, m); err != nil {
		return 0, fmt.Errorf("store dead letter of %s in %s: %w", downstream, ds.name, err)
	}
	return pa.Sequence, nil
}

// publish sends m expecting ds's stream to store it, without the client's
// retries on no responders (a missing stream is made by Put instead).
func (d *Store) publish(ctx context.Context, ds *deadStream, m *nats.Msg) (*natsjs.PubAck, error) {
	return d.js.PublishMsg(ctx, m, natsjs.WithExpectStream(ds.name), natsjs.WithRetryAttempts(0))
}

// incompatible reports every setting of an existing dead-letter stream
// that cannot be changed in place and differs from want (its subject is
// updated instead).
func incompatible(have, want natsjs.StreamConfig) error {
	return errors.Join(jetstream.Unchangeable(have, want, ErrIncompatible, "dead letters")...)
}
