package jetstream

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/queue"
)

// Tuning of the dedupe records.
const (
	recordTimeout = 5 * time.Second       // one lookup or write
	duplicateWait = 5 * time.Second       // a refused copy waits this long for its original's job id
	recordPoll    = 50 * time.Millisecond // between its lookups
	maxDuplicates = 2 * time.Minute       // the records stream's own duplicate window, at most
	hdrRecordAt   = hdrEnqueued           // on a record: when its job was accepted, unix nanoseconds
	recordsSuffix = "_DEDUPE"             // the bucket: <StreamPrefix>_DEDUPE
	kvStreamPre   = "KV_"                 // a bucket's stream, as NATS KV names it
	kvSubjectPre  = "$KV."                // a bucket's subjects, as NATS KV names them
)

// RecordBucket returns the name of the bucket that keeps, for the dedupe
// window, the job id of every job stored with a Nats-Msg-Id; its stream is
// KV_<bucket>, so `nats kv get <bucket> <key>` reads it.
func (st *Store) RecordBucket() string { return st.set.StreamPrefix + recordsSuffix }

func (st *Store) recordStream() string { return kvStreamPre + st.RecordBucket() }

// recordSubject is msgID's key in the bucket: the id in base64url, so that
// any id (up to the intake's limit) is one valid key, exactly.
func (st *Store) recordSubject(msgID string) string {
	return kvSubjectPre + st.RecordBucket() + "." + base64.RawURLEncoding.EncodeToString([]byte(msgID))
}

// recordConfig is the records stream: a NATS KV bucket's layout (one value
// per key, values expire after the window, direct gets: a lookup is
// answered by any replica, inline, without the JetStream API's queue).
func (st *Store) recordConfig() natsjs.StreamConfig {
	storage := st.storage()
	return natsjs.StreamConfig{
		Name:              st.recordStream(),
		Description:       "shaperd: job id of each Nats-Msg-Id, kept for ingress.dedupe_window",
		Subjects:          []string{kvSubjectPre + st.RecordBucket() + ".>"},
		Storage:           storage,
		Replicas:          st.set.Replicas,
		MaxMsgsPerSubject: 1,
		MaxAge:            st.set.DedupeWindow,
		Discard:           natsjs.DiscardOld,
		Duplicates:        min(st.set.DedupeWindow, maxDuplicates),
		DenyDelete:        true,
		AllowRollup:       true,
		AllowDirect:       true,
	}
}

// ensureRecords creates the records stream, or sets an existing one's
// window to the config's, and keeps its handle.
func (st *Store) ensureRecords(ctx context.Context) (natsjs.Stream, error) {
	want := st.recordConfig()
	s, err := st.js.Stream(ctx, want.Name)
	switch {
	case errors.Is(err, natsjs.ErrStreamNotFound):
		if s, err = st.js.CreateStream(ctx, want); err != nil {
			return nil, fmt.Errorf("create stream %s: %w", want.Name, err)
		}
		st.log.Info("jetstream dedupe records stream created", "stream", want.Name, "window", want.MaxAge)
	case err != nil:
		return nil, fmt.Errorf("look up stream %s: %w", want.Name, err)
	default:
		have := s.CachedInfo().Config
		if have.MaxAge != want.MaxAge || have.Duplicates != want.Duplicates || !have.AllowDirect {
			upd := have
			upd.MaxAge, upd.Duplicates, upd.AllowDirect = want.MaxAge, want.Duplicates, true
			if s, err = st.js.UpdateStream(ctx, upd); err != nil {
				return nil, fmt.Errorf("update stream %s (max_age %s): %w", want.Name, want.MaxAge, err)
			}
		}
	}
	st.mu.Lock()
	st.records = s
	st.mu.Unlock()
	return s, nil
}

// lookup returns the job id recorded for msgID within the window; found
// is false when there is none. It asks the table, and the records stream
// (a direct get) only when the table cannot answer a miss.
func (st *Store) lookup(ctx context.Context, msgID string) (jobID string, found bool, err error) {
	if jobID, found, sure := st.table.get(time.Now(), msgID); found || sure {
		return jobID, found, nil
	}
	if err := st.startRecords(ctx); err != nil {
		return "", false, err
	}
	return st.lookupStored(ctx, msgID)
}

// lookupStored returns the job id recorded for msgID within the window,
// read from the records stream (a direct get).
func (st *Store) lookupStored(ctx context.Context, msgID string) (jobID string, found bool, err error) {
	st.mu.Lock()
	s := st.records
	st.mu.Unlock()
	if s == nil {
		return "", false, fmt.Errorf("look up message id: stream %s not ensured yet", st.recordStream())
	}
	raw, err := s.GetLastMsgForSubject(ctx, st.recordSubject(msgID))
	switch {
	case errors.Is(err, natsjs.ErrMsgNotFound):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("look up message id in stream %s: %w", st.recordStream(), err)
	}
	// The server drops expired records about once a second: count the
	// window from the job's acceptance, exactly.
	at := unixNano(raw.Header.Get(hdrRecordAt))
	if at.IsZero() {
		at = raw.Time
	}
	if time.Since(at) >= st.set.DedupeWindow || len(raw.Data) == 0 {
		return "", false, nil
	}
	return string(raw.Data), true, nil
}

// recordMsg is the record of job, stored under its Nats-Msg-Id.
func (st *Store) recordMsg(msgID, jobID string, enqueued time.Time) *nats.Msg {
	m := &nats.Msg{Subject: st.recordSubject(msgID), Data: []byte(jobID), Header: nats.Header{}}
	if !enqueued.IsZero() {
		m.Header.Set(hdrRecordAt, strconv.FormatInt(enqueued.UnixNano(), 10))
	}
	return m
}

// lookUpThenSend answers job from its record when its id was accepted
// within the window and its job left the stream since (queue.ErrDuplicate
// with the original's id), else stores it; the answer takes its turn in
// q's order, so jobs are stored in the order they were offered. It runs
// in its own goroutine: the lookup is a round trip.
func (st *Store) lookUpThenSend(q *Queue, job *queue.Job, done func(int, error), turn *step) {
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	jobID, found, err := st.lookup(ctx, job.DedupeID)
	cancel()
	switch {
	case err != nil:
		q.order.ready(turn, func() { done(0, err) })
	case found:
		q.order.ready(turn, func() {
			job.ID = jobID
			done(0, queue.ErrDuplicate)
		})
	default:
		q.order.ready(turn, func() { st.send(q, job, done) })
	}
}

// duplicate answers a publish the stream's duplicate window refused, with
// the id of the job stored first: the stored original's or, once it left
// the stream, its record's (stored before it left, so read from the
// records stream, not the table, which gets it a few milliseconds later).
// Each read waits at most RequestTimeout and they are tried again for up
// to duplicateWait, so a read lost while a stream elects its leader delays
// the answer rather than leave it without a job id. When neither is found
// by then the answer is a duplicate without a job id, never an id no job
// had.
func (st *Store) duplicate(p pendingPub, seq uint64) {
	p.job.ID = st.originalWithin(p, seq, "duplicate Nats-Msg-Id", "unused_job_id", p.job.ID)
	p.done(0, queue.ErrDuplicate)
}

// originalID reads the job id of the original of p's job: the message at
// seq while it is stored, else its record.
func (st *Store) originalID(p pendingPub, seq uint64) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
	defer cancel()
	s := p.q.streamHandle()
	if s == nil { // not ensured yet
		s, _ = st.js.Stream(ctx, p.q.stream)
	}
	if s != nil {
		if raw, err := s.GetMsg(ctx, seq); err == nil {
			if id := raw.Header.Get(hdrJobID); id != "" {
				return id, true
			}
			if epoch := p.q.epochNow(); epoch != "" {
				return nameOf(epoch, seq), true
			}
		}
	}
	if p.job.DedupeID == "" {
		return "", false
	}
	rctx, rcancel := context.WithTimeout(context.Background(), RequestTimeout)
	defer rcancel()
	jobID, found, err := st.lookupStored(rctx, p.job.DedupeID)
	return jobID, err == nil && found
}
