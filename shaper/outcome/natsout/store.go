package natsout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/queue/jetstream"
	"github.com/shaperd/shaper/shaper/outcome"
)

// Settings place the record and event streams; zero fields take the
// defaults. StreamPrefix and SubjectPrefix are the durable queue's.
type Settings struct {
	StreamPrefix  string       // streams <StreamPrefix>_OUTCOMES_D and _EVENTS_D; "" = SHAPER
	SubjectPrefix string       // records on <SubjectPrefix>-outcomes.D.<id>; "" = shaper.queue
	Replicas      int          // stream replicas; 0 = 1
	Storage       string       // "file" (default) or "memory"
	Logger        *slog.Logger // nil = discard
	// Discarded is told how many finished records of a downstream the
	// store discarded for room (nil = none): the
	// shaper_outcome_records_discarded_total counter.
	Discarded func(downstream string, n int)
}

// Store keeps job records in JetStream, one stream per downstream (see
// the package doc). It implements outcome.Store. Create it with NewStore;
// it is safe for concurrent use, and every method but the names does I/O
// bounded by its ctx.
type Store struct {
	now func() time.Time
	js  natsjs.JetStream
	set Settings
	log *slog.Logger
	// beforeMove, when set (by tests), runs after a trim chose the
	// records to move and before it moves them.
	beforeMove func()

	mu    sync.Mutex
	lanes map[string]*lane // by downstream
}

// lane is one downstream's record stream: the room and keep it was
// ensured with (zero until Ensure), its handle (nil until known), when
// its records were last measured for trimming and whether a trim runs.
type lane struct {
	ensured  bool
	room     int64
	keep     time.Duration
	s        natsjs.Stream
	trimmed  time.Time
	trimming bool
	trimWait time.Duration // between trims: trimEvery, longer after trims that churned (trim.go)
}

// NewStore prepares the record store on nc. It does no I/O.
func NewStore(nc *nats.Conn, s Settings) (*Store, error) {
	if s.StreamPrefix == "" {
		s.StreamPrefix = jetstream.DefaultStreamPrefix
	}
	if s.SubjectPrefix == "" {
		s.SubjectPrefix = jetstream.DefaultSubjectPrefix
	}
	s.Replicas = max(s.Replicas, 1)
	switch s.Storage {
	case "":
		s.Storage = "file"
	case "file", "memory":
	default:
		return nil, fmt.Errorf("natsout: storage %q: want file or memory", s.Storage)
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	js, err := natsjs.New(nc)
	if err != nil {
		return nil, fmt.Errorf("natsout: %w", err)
	}
	return &Store{now: time.Now, js: js, set: s, log: s.Logger, lanes: map[string]*lane{}}, nil
}

// StreamName is the stream of downstream's records.
func (s *Store) StreamName(downstream string) string {
	return s.set.StreamPrefix + "_OUTCOMES_" + downstream
}

// liveStreamName is the stream of the records of downstream's jobs not
// yet ended in the two-stream layout, which Ensure deletes.
func (s *Store) liveStreamName(downstream string) string {
	return s.set.StreamPrefix + "_OUTCOMES_LIVE_" + downstream
}

// EventsStreamName is the stream of downstream's events.
func (s *Store) EventsStreamName(downstream string) string {
	return s.set.StreamPrefix + "_EVENTS_" + downstream
}

// Subject is the subject of job id's record.
func (s *Store) Subject(downstream, id string) string {
	return s.set.SubjectPrefix + "-outcomes." + downstream + "." + id
}

// storage is the settings' storage type.
func (s *Store) storage() natsjs.StorageType {
	if s.set.Storage == "memory" {
		return natsjs.MemoryStorage
	}
	return natsjs.FileStorage
}

// token checks that name (a downstream, a job id) is one subject token
// that can also be part of a stream name.
func token(what, name string) error {
	if name == "" || strings.ContainsAny(name, ".*> \t\r\n/\\") {
		return fmt.Errorf("natsout: %s %q: want a non-empty name without '.', '*', '>', '/', '\\' or spaces", what, name)
	}
	return nil
}

// Ensure creates downstream's record stream, or updates an existing one
// in place to the layout the package doc describes. room bounds the
// finished records, which the store trims to it (0 = no bound); the
// stream itself has no byte bound, so that the server never discards a
// queued or running job's record. keep is the downstream's
// outcomes.keep: each final record carries its own (Entry.Keep), so the
// stream only names it in its description. Ensure is idempotent, and
// several instances may call it at once. An existing stream whose
// retention, storage, replicas or discard policy differ is reported
// (ErrIncompatible) and never changed.
//
// A records stream of an earlier layout (finished records on
// <SubjectPrefix>-outcomes.D.done.*, or every record on
// <SubjectPrefix>-outcomes.D.*) is moved to the subjects of this one in
// place, and the live records' stream of the two-stream layout,
// <StreamPrefix>_OUTCOMES_LIVE_D, is deleted with what it held.
func (s *Store) Ensure(ctx context.Context, downstream string, room int64, keep time.Duration) error {
	if err := token("downstream", downstream); err != nil {
		return err
	}
	if room < 0 || keep < 0 {
		return fmt.Errorf("natsout: records of %s: room %d and keep %s must be >= 0", downstream, room, keep)
	}
	st, err := s.ensure(ctx, s.recordStream(downstream, keep), "job records")
	if err != nil {
		return err
	}
	if err := s.dropLive(ctx, downstream); err != nil {
		return err
	}
	s.mu.Lock()
	l := s.lane(downstream)
	l.ensured, l.room, l.keep, l.s = true, room, keep, st
	s.mu.Unlock()
	return nil
}

// dropLive deletes downstream's live records' stream of the two-stream
// layout, if there is one. That layout was never released, so the
// records of jobs not yet ended it held are let go rather than moved:
// such a job is answered again from its next change on. Another
// instance deleting it at the same time is no error.
func (s *Store) dropLive(ctx context.Context, downstream string) error {
	name := s.liveStreamName(downstream)
	// Looked up first, so that only a store that has it needs the
	// permission to delete it.
	_, err := s.js.Stream(ctx, name)
	if err == nil {
		err = s.js.DeleteStream(ctx, name)
	}
	switch {
	case err == nil:
		s.log.Info("stream deleted: job records now live in one stream", "stream", name,
			"records", s.StreamName(downstream))
		return nil
	case errors.Is(err, natsjs.ErrStreamNotFound):
		return nil
	}
	return fmt.Errorf("delete stream %s, the live job records of the earlier layout (now in %s): %w",
		name, s.StreamName(downstream), err)
}

// recordStream is the config of downstream's record stream.
func (s *Store) recordStream(downstream string, keep time.Duration) natsjs.StreamConfig {
	return natsjs.StreamConfig{
		Name:              s.StreamName(downstream),
		Description:       fmt.Sprintf("shaperd job records of downstream %s, each kept %s after its job ends", downstream, keep),
		Subjects:          []string{s.Subject(downstream, "*")},
		Retention:         natsjs.LimitsPolicy,
		Storage:           s.storage(),
		Replicas:          s.set.Replicas,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxMsgsPerSubject: 1,
		Discard:           natsjs.DiscardOld,
		AllowMsgTTL:       true,
		AllowDirect:       true,
	}
}

// EnsureEvents creates downstream's event stream on
// <eventsPrefix>.<downstream>.*, or updates an existing one in place:
// events are kept keep (MaxAge; 0 = no age bound) within room (MaxBytes;
// 0 = no byte bound), the oldest discarded first. Like Ensure it is
// idempotent and never changes an incompatible stream.
func (s *Store) EnsureEvents(ctx context.Context, downstream, eventsPrefix string, room int64, keep time.Duration) error {
	if err := token("downstream", downstream); err != nil {
		return err
	}
	if eventsPrefix == "" || room < 0 || keep < 0 {
		return fmt.Errorf("natsout: events of %s: need an events prefix, and room %d and keep %s >= 0",
			downstream, room, keep)
	}
	// Events carry no Nats-Msg-Id, so the duplicate window does nothing;
	// the server wants it no longer than the max age.
	dups := 2 * time.Minute
	if keep > 0 {
		dups = min(dups, keep)
	}
	want := natsjs.StreamConfig{
		Name:        s.EventsStreamName(downstream),
		Description: "shaperd job events of downstream " + downstream,
		Subjects:    []string{eventsPrefix + "." + downstream + ".*"},
		Retention:   natsjs.LimitsPolicy,
		Storage:     s.storage(),
		Replicas:    s.set.Replicas,
		MaxMsgs:     -1,
		MaxBytes:    bound(room),
		MaxAge:      keep,
		Discard:     natsjs.DiscardOld,
		Duplicates:  dups,
	}
	_, err := s.ensure(ctx, want, "job events")
	return err
}

// bound is a stream limit for n (0: none).
func bound(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}

// lane returns downstream's lane, creating it. Requires s.mu.
func (s *Store) lane(downstream string) *lane {
	l := s.lanes[downstream]
	if l == nil {
		l = &lane{}
		s.lanes[downstream] = l
	}
	return l
}

// ensure creates want, or updates the stream of its name to it; holds
// says what the stream keeps. A create that loses a race with another
// instance's is taken as an update.
func (s *Store) ensure(ctx context.Context, want natsjs.StreamConfig, holds string) (natsjs.Stream, error) {
	for range 2 {
		st, err := s.js.Stream(ctx, want.Name)
		if errors.Is(err, natsjs.ErrStreamNotFound) {
			st, err = s.js.CreateStream(ctx, want)
			if errors.Is(err, natsjs.ErrStreamNameAlreadyInUse) {
				continue // another instance made it first: compare with its
			}
			if err != nil {
				return nil, fmt.Errorf("create stream %s of %s on %s: %w", want.Name, holds, want.Subjects[0], err)
			}
			s.log.Info("stream created", "stream", want.Name, "holds", holds, "subject", want.Subjects[0],
				"max_bytes", want.MaxBytes, "max_age", want.MaxAge, "storage", want.Storage.String())
			return st, nil
		}
		if err != nil {
			return nil, fmt.Errorf("look up stream %s of %s: %w", want.Name, holds, err)
		}
		return s.update(ctx, st, want, holds)
	}
	return nil, fmt.Errorf("create stream %s of %s: it was made and removed while shaperd looked", want.Name, holds)
}

// update brings the existing st to want where it differs in what can
// change in place, and reports what cannot.
func (s *Store) update(ctx context.Context, st natsjs.Stream, want natsjs.StreamConfig, holds string) (natsjs.Stream, error) {
	have := st.CachedInfo().Config
	if errs := jetstream.Unchangeable(have, want, ErrIncompatible, holds); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	upd := have
	upd.Description, upd.Subjects = want.Description, want.Subjects
	upd.MaxMsgs, upd.MaxBytes, upd.MaxAge = want.MaxMsgs, want.MaxBytes, want.MaxAge
	upd.MaxMsgsPerSubject, upd.AllowMsgTTL, upd.AllowDirect = want.MaxMsgsPerSubject, want.AllowMsgTTL, want.AllowDirect
	if want.Duplicates > 0 {
		upd.Duplicates = want.Duplicates
	}
	if same(have, upd) {
		return st, nil
	}
	st, err := jetstream.UpdateKeepingRoom(ctx, s.js, upd, have.MaxBytes, s.log, holds)
	if err != nil {
		return nil, fmt.Errorf("update stream %s of %s (subject %s, max_bytes %d, max_age %s): %w",
			want.Name, holds, want.Subjects[0], want.MaxBytes, want.MaxAge, err)
	}
	return st, nil
}

// same reports whether a and b agree in every setting update changes.
func same(a, b natsjs.StreamConfig) bool {
	return a.Description == b.Description && len(a.Subjects) == 1 && len(b.Subjects) == 1 &&
		a.Subjects[0] == b.Subjects[0] && a.MaxMsgs == b.MaxMsgs && a.MaxBytes == b.MaxBytes &&
		a.MaxAge == b.MaxAge && a.MaxMsgsPerSubject == b.MaxMsgsPerSubject &&
		a.AllowMsgTTL == b.AllowMsgTTL && a.AllowDirect == b.AllowDirect && a.Duplicates == b.Duplicates
}

// The roles this package fills.
var (
	_ outcome.Store  = (*Store)(nil)
	_ outcome.Teller = (*Teller)(nil)
)
