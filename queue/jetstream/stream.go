package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	natsjs "github.com/nats-io/nats.go/jetstream"
)

// bounds are what a queue's stream is bounded by.
type bounds struct {
	capacity int   // max_msgs
	maxBytes int64 // max_bytes; 0 = none (-1 on the stream)
	// explicit says maxBytes is queue.max_bytes; else it is the queue's
	// share of a bounded store (QueueSettings.StoreShare).
	explicit bool
	// perKey is queue.key_capacity under fairness: the jobs one key's
	// subject may hold (max_msgs_per_subject, discard new per subject);
	// 0 = none.
	perKey int
}

// bounds are qs's stream bounds: queue.max_bytes when set, else the
// store share.
func (qs QueueSettings) bounds() bounds {
	b := bounds{capacity: qs.Capacity, maxBytes: qs.StoreShare, perKey: perKeyBound(qs.Fairness, qs.KeyCapacity, qs.Capacity)}
	if qs.MaxBytes > 0 {
		b.maxBytes, b.explicit = qs.MaxBytes, true
	}
	return b
}

// SetShare changes the queue's share of a bounded store
// (QueueSettings.StoreShare; 0 = none), which bounds its stream unless
// queue.max_bytes does. While NATS is connected the stream is updated
// now, within ctx; otherwise, or when that fails (the error is returned),
// the maintenance goroutine updates it, trying again until it succeeds. A
// stream holding more than its new bound keeps every job and takes no new
// one until it is below it (discard new).
func (q *Queue) SetShare(ctx context.Context, n int64) error {
	q.mu.Lock()
	q.share = n
	b := q.bounds
	if b.explicit || b.maxBytes == n {
		q.mu.Unlock()
		return nil
	}
	b.maxBytes = n
	q.bounds = b
	now := q.s != nil && q.st.nc.IsConnected()
	q.capDirty = !now
	q.mu.Unlock()
	if !now {
		return nil
	}
	if _, _, err := q.st.ensure(ctx, q.name, b); err != nil {
		q.mu.Lock()
		q.capDirty = true
		q.mu.Unlock()
		return err
	}
	return nil
}

// perKeyBound is the jobs one key's subject may hold: key_capacity under
// fairness when it bounds anything (0, or the capacity, does not), else 0.
func perKeyBound(fair bool, keyCap, capacity int) int {
	if !fair || keyCap <= 0 || keyCap >= capacity {
		return 0
	}
	return keyCap
}

// storage is the streams' storage (Settings.Storage).
func (st *Store) storage() natsjs.StorageType {
	if st.set.Storage == "memory" {
		return natsjs.MemoryStorage
	}
	return natsjs.FileStorage
}

// streamConfig is the stream that holds downstream's queue.
func (st *Store) streamConfig(downstream string, b bounds) natsjs.StreamConfig {
	storage := st.storage()
	return natsjs.StreamConfig{
		Name:        st.StreamName(downstream),
		Description: "shaperd queue of downstream " + downstream,
		Subjects:    st.subjects(downstream),
		Retention:   natsjs.WorkQueuePolicy,
		Storage:     storage,
		Replicas:    st.set.Replicas,
		Placement:   st.placementOf(downstream),
		MaxMsgs:     int64(b.capacity),
		MaxBytes:    streamMaxBytes(b.maxBytes),
		Discard:     natsjs.DiscardNew,
		MaxMsgSize:  st.set.MaxMsgSize,
		Duplicates:  st.set.DedupeWindow,
		// The promoter reads each subject's next jobs in batches (a direct
		// get of a batch).
		AllowDirect: true,
		// Under fairness each key's jobs are on a subject of their own:
		// the server bounds each key for every instance and producer.
		MaxMsgsPerSubject:    streamMaxPerKey(b.perKey),
		DiscardNewPerSubject: b.perKey > 0,
		// Queue.OfferAll stores several jobs as one atomic batch
		// (nats-server 2.12+; an older server ignores it, see atomic.go).
		AllowAtomicPublish: true,
	}
}

// streamMaxPerKey is a stream's max_msgs_per_subject for a per-key bound
// of n jobs (0 = none).
func streamMaxPerKey(n int) int64 {
	if n <= 0 {
		return -1
	}
	return int64(n)
}

// streamMaxBytes is a stream's max_bytes for a bound of n bytes (0 = none).
func streamMaxBytes(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}

// ensure creates downstream's stream and consumer, or checks an existing
// stream: incompatible settings are an ErrIncompatible naming each; the
// capacity, byte bound, message size and duplicate window are updated to
// the config.
//
// Each request waits at most RequestTimeout (or until ctx is done): a
// request lost while the cluster elects a leader costs that, and the
// caller tries again, rather than the whole of ctx.
func (st *Store) ensure(ctx context.Context, downstream string, b bounds) (natsjs.Stream, natsjs.Consumer, error) {
	want := st.streamConfig(downstream, b)
	rctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	s, err := st.js.Stream(rctx, want.Name)
	cancel()
	switch {
	case errors.Is(err, natsjs.ErrStreamNotFound):
		rctx, cancel := context.WithTimeout(ctx, RequestTimeout)
		defer cancel()
		if s, err = st.js.CreateStream(rctx, want); err != nil {
			return nil, nil, fmt.Errorf("create stream %s: %w", want.Name, err)
		}
		st.log.Info("jetstream queue stream created", "stream", want.Name, "subject", want.Subjects[0],
			"replicas", want.Replicas, "storage", want.Storage.String(), "max_msgs", want.MaxMsgs, "max_bytes", want.MaxBytes)
	case err != nil:
		return nil, nil, fmt.Errorf("look up stream %s: %w", want.Name, err)
	default:
		have := s.CachedInfo().Config
		if err := incompatible(have, want); err != nil {
			return nil, nil, err
		}
		if s, err = st.update(ctx, s, have, want); err != nil {
			return nil, nil, err
		}
	}
	st.setEpoch(downstream, s)
	if err := st.dropLegacyConsumer(ctx, s); err != nil {
		return nil, nil, err
	}
	w, err := st.ensureWindow(ctx)
	if err != nil {
		return nil, nil, err
	}
	cc := st.windowConsumer(downstream)
	rctx, cancel = context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	c, err := st.js.CreateOrUpdateConsumer(rctx, w.CachedInfo().Config.Name, cc)
	if err != nil {
		return nil, nil, fmt.Errorf("stream %s: create consumer %s: %w", w.CachedInfo().Config.Name, cc.Durable, err)
	}
	return s, c, nil
}

// dropLegacyConsumer deletes the consumer the previous version drained a
// queue's stream with (it fetched the stream's jobs themselves; the drain
// now reads them in order and delivers tokens of the window), with one
// log line. The jobs it held stay in the stream and are promoted again;
// the tries they made are forgotten.
func (st *Store) dropLegacyConsumer(ctx context.Context, s natsjs.Stream) error {
	info := s.CachedInfo()
	if info == nil || info.State.Consumers == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	err := s.DeleteConsumer(rctx, Consumer)
	switch {
	case errors.Is(err, natsjs.ErrConsumerNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("stream %s: delete the previous version's consumer %s: %w", info.Config.Name, Consumer, err)
	}
	st.log.Info("jetstream queue migrated: its stream is drained through the window; the jobs the previous version's consumer held are queued again, their tries forgotten",
		"stream", info.Config.Name, "window", st.WindowStream())
	return nil
}

// update brings an existing stream's changeable settings to want's: the
// bounds, message size, duplicate window, direct gets and atomic batches
// (a previous version's stream gains allow_atomic), and the subjects of the
// previous version's layout (one subject, <SubjectPrefix>.D), which are
// extended in place (additive: each job stored there keeps its meaning).
func (st *Store) update(ctx context.Context, s natsjs.Stream, have, want natsjs.StreamConfig) (natsjs.Stream, error) {
	migrate := !slices.Equal(have.Subjects, want.Subjects)
	if have.MaxMsgs == want.MaxMsgs && have.MaxBytes == want.MaxBytes && have.MaxMsgSize == want.MaxMsgSize &&
		have.Duplicates == want.Duplicates && have.MaxMsgsPerSubject == want.MaxMsgsPerSubject &&
		have.DiscardNewPerSubject == want.DiscardNewPerSubject && have.AllowDirect == want.AllowDirect &&
		have.AllowAtomicPublish == want.AllowAtomicPublish && !migrate {
		return s, nil
	}
	upd := have
	upd.MaxMsgs, upd.MaxBytes, upd.MaxMsgSize, upd.Duplicates = want.MaxMsgs, want.MaxBytes, want.MaxMsgSize, want.Duplicates
	upd.MaxMsgsPerSubject, upd.DiscardNewPerSubject, upd.Subjects = want.MaxMsgsPerSubject, want.DiscardNewPerSubject, want.Subjects
	upd.AllowDirect, upd.AllowAtomicPublish = want.AllowDirect, want.AllowAtomicPublish
	rctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	s, err := UpdateKeepingRoom(rctx, st.js, upd, have.MaxBytes, st.log, "jobs")
	if err != nil {
		return nil, fmt.Errorf("update stream %s (subjects %v, max_msgs %d, max_bytes %d, max_msgs_per_subject %d, max_msg_size %d, duplicates %s, allow_atomic %t): %w",
			want.Name, want.Subjects, want.MaxMsgs, want.MaxBytes, want.MaxMsgsPerSubject, want.MaxMsgSize, want.Duplicates, want.AllowAtomicPublish, err)
	}
	if migrate {
		st.log.Info("jetstream queue stream migrated to the layout of priorities, delays and fairness: its jobs keep their meaning",
			"stream", want.Name, "subjects_were", "["+strings.Join(have.Subjects, ", ")+"]", "subjects", "["+strings.Join(want.Subjects, ", ")+"]")
	}
	return s, nil
}

// UpdateKeepingRoom updates a stream to upd. When the server refuses
// upd.MaxBytes for want of storage it can reserve (the store's limit is
// held by the bounds of other streams, such as those of a downstream no
// longer configured) and the stream had a bound of was bytes, lower than
// upd's, the stream keeps was: updated with it, logged, and not an error.
// A stream is never lost over a bound, nor any job or dead letter it
// holds (holds says what: "jobs", "dead letters").
func UpdateKeepingRoom(ctx context.Context, js natsjs.JetStream, upd natsjs.StreamConfig, was int64, log *slog.Logger, holds string) (natsjs.Stream, error) {
	s, err := js.UpdateStream(ctx, upd)
	var apiErr *natsjs.APIError
	if err == nil || !errors.As(err, &apiErr) || apiErr.ErrorCode != errCodeStorageResources ||
		was <= 0 || (upd.MaxBytes > 0 && upd.MaxBytes <= was) {
		return s, err
	}
	want := upd.MaxBytes
	upd.MaxBytes = was
	if s, err = js.UpdateStream(ctx, upd); err != nil {
		return nil, err
	}
	log.Warn("stream keeps its byte bound: the server cannot reserve room for its new share of the store, "+
		"which other streams' bounds hold (a downstream no longer configured keeps its streams until they are deleted)",
		"stream", upd.Name, "holds", holds, "max_bytes", was, "share", want)
	return s, nil
}

// incompatible compares the settings that are never changed automatically.
// The subjects of the previous version's layout are not incompatible:
// update extends them.
func incompatible(have, want natsjs.StreamConfig) error {
	errs := Unchangeable(have, want, ErrIncompatible, "jobs")
	if !slices.Equal(have.Subjects, want.Subjects) && !slices.Equal(have.Subjects, want.Subjects[:1]) {
		errs = append(errs, unchangeable(have.Name, "subjects", "["+strings.Join(have.Subjects, ", ")+"]",
			"["+strings.Join(want.Subjects, ", ")+"]", ErrIncompatible, "jobs"))
	}
	return errors.Join(errs...)
}

// Unchangeable returns an error wrapping sentinel for every setting of an
// existing stream (have) that differs from want and that shaperd never
// changes in place: retention, storage, replicas and discard. Each names
// the setting, both values and the operator's way out; holds says what the
// stream keeps ("jobs", "dead letters").
func Unchangeable(have, want natsjs.StreamConfig, sentinel error, holds string) []error {
	var errs []error
	for _, d := range []struct {
		setting string
		h, w    any
	}{
		{"retention", have.Retention, want.Retention},
		{"storage", have.Storage, want.Storage},
		{"replicas", have.Replicas, want.Replicas},
		{"discard", have.Discard, want.Discard},
	} {
		if d.h != d.w {
			errs = append(errs, unchangeable(have.Name, d.setting, d.h, d.w, sentinel, holds))
		}
	}
	return errs
}

func unchangeable(stream, setting string, h, w any, sentinel error, holds string) error {
	return fmt.Errorf("%w: stream %s: %s is %v, shaperd needs %v; it is not changed automatically: "+
		"move its %s and delete it (nats stream rm %s), or set nats.jetstream.stream_prefix to use other streams",
		sentinel, stream, setting, h, w, holds, stream)
}
