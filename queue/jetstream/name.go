package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/shaperd/shaper/queue"
)

// A job offered without an ID is named by its place: <epoch>-<seq>, its
// sequence in the queue's stream after the stream's epoch, the instant
// the stream was created (unix milliseconds, base 36), which every
// instance reads from the stream's info and which a stream created again
// changes, so a name is never given twice. Such a job's message carries
// no Shaper-Job-Id: its PubAck names it. While it is stored, Find reads it
// by its sequence, so its state needs no record of its own until it is
// taken (the shaper's job records start then); a job offered with an ID
// (a replayed dead letter, a caller's own) keeps it in Shaper-Job-Id.

// epochOf is the epoch of a stream created at created.
func epochOf(created time.Time) string { return strconv.FormatInt(created.UnixMilli(), 36) }

// nameOf is the name of the job stored at seq in a stream of epoch; with
// no epoch known, seq-<seq> (a job read before its stream's info was).
func nameOf(epoch string, seq uint64) string {
	if epoch == "" {
		return "seq-" + strconv.FormatUint(seq, 10)
	}
	return epoch + "-" + strconv.FormatUint(seq, 10)
}

// parseName splits a name into its epoch and sequence.
func parseName(id string) (epoch string, seq uint64, ok bool) {
	i := strings.LastIndexByte(id, '-')
	if i <= 0 {
		return "", 0, false
	}
	seq, err := strconv.ParseUint(id[i+1:], 10, 64)
	if err != nil || seq == 0 {
		return "", 0, false
	}
	return id[:i], seq, true
}

// epochNow is the epoch of q's stream, "" until it was ensured.
func (q *Queue) epochNow() string {
	if e, ok := q.st.epochs.Load(q.name); ok {
		return e.(string)
	}
	return ""
}

// setEpoch takes the epoch of downstream's stream from the info of s.
func (st *Store) setEpoch(downstream string, s natsjs.Stream) {
	if info := s.CachedInfo(); info != nil && !info.Created.IsZero() {
		st.epochs.Store(downstream, epochOf(info.Created))
	}
}

// Find returns the job named id while it is stored in q's stream
// (queue.Finder): one read of the stream by sequence. A name of another
// epoch, or a sequence that holds no job or a job with an id of its own,
// is not found.
func (q *Queue) Find(ctx context.Context, id string) (*queue.Job, bool, error) {
	epoch, seq, ok := parseName(id)
	if !ok || epoch != q.epochNow() {
		return nil, false, nil
	}
	s := q.streamHandle()
	if s == nil { // not started: ask the stream itself
		var err error
		if s, err = q.st.js.Stream(ctx, q.stream); err != nil {
			return nil, false, fmt.Errorf("stream %s: read job %s: %w", q.stream, id, err)
		}
	}
	raw, err := s.GetMsg(ctx, seq)
	switch {
	case errors.Is(err, natsjs.ErrMsgNotFound):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("stream %s: read job %s: %w", q.stream, id, err)
	case raw.Header.Get(hdrJobID) != "":
		return nil, false, nil
	}
	return decodeStored(raw.Header, raw.Data, q.name, epoch, raw.Sequence, raw.Time), true, nil
}
