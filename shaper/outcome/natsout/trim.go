package natsout

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// Trimming the finished records: past trimAbove of its room a
// downstream's records are trimmed, the oldest finished first, to about
// trimTo of it, at most once every trimEvery. One trim reads at most
// trimScan records, scanBatch at a time, and moves at most moveMax of
// jobs not yet ended, moveBatch at a time.
const (
	trimAbove = 0.9
	trimTo    = 0.8
	trimEvery = time.Second
	// trimBackOff bounds the wait between trims that found mostly records
	// of jobs not yet ended (a backlog larger than the room): each such
	// trim doubles the wait, from trimEvery, up to this.
	trimBackOff = 10 * time.Minute
	trimScan    = 100_000
	scanBatch   = 4096
	moveMax     = 10_000
	moveBatch   = 256
)

// trim keeps downstream's finished records within their room, so that
// the stream, which has no byte bound, does not outgrow it: when the
// records fill more than trimAbove of the room, the oldest finished
// ones are purged down to about trimTo, and Settings.Discarded is told
// exactly how many went. The records of jobs not yet ended among the
// oldest are first published again (see move), so that the purge, of
// every message below a sequence, takes finished records only. It reads
// the stream's state at most once every trimEvery per downstream, one
// trim at a time, and not at all for a downstream ensured with no room
// bound. A failure is logged: the records are stored, and a later trim
// tries again.
func (s *Store) trim(ctx context.Context, downstream string) {
	room, ok := s.due(downstream)
	if !ok {
		return
	}
	churned := false // moved more live records than half the excess: wait longer next time
	defer func() { s.trimmed(downstream, churned) }()
	name := s.StreamName(downstream)
	fail := func(err error) {
		s.log.Warn("job records not trimmed to their room", "downstream", downstream, "stream", name,
			"error", err.Error())
	}
	st, err := s.stream(ctx, downstream)
	if err != nil || st == nil {
		return
	}
	info, err := st.Info(ctx)
	if err != nil {
		if errors.Is(err, natsjs.ErrStreamNotFound) {
			s.forget(downstream)
		}
		fail(err)
		return
	}
	n := excess(info.State.Msgs, info.State.Bytes, room)
	if n == 0 {
		return
	}
	below, live, err := s.scan(ctx, st, info.State, n)
	if err != nil {
		fail(err)
		return
	}
	if s.beforeMove != nil {
		s.beforeMove()
	}
	below, moved, err := s.move(ctx, st, live, below)
	if err != nil {
		fail(err) // purge what lies below the record not moved
	}
	churned = uint64(moved) > n/2
	if below <= info.State.FirstSeq {
		return
	}
	purged, err := s.purge(ctx, name, below)
	if err != nil {
		fail(err)
		return
	}
	s.log.Debug("job records trimmed to their room", "downstream", downstream, "stream", name,
		"discarded", purged, "moved", moved, "room", room)
	if purged > 0 && s.set.Discarded != nil {
		s.set.Discarded(downstream, purged)
	}
}

// due reports whether downstream's records are to be measured now, and
// if so books it and returns its room: trimmed ends the trim.
func (s *Store) due(downstream string) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lane(downstream)
	if l.room == 0 || l.trimming {
		return 0, false
	}
	now := s.now()
	if d := now.Sub(l.trimmed); !l.trimmed.IsZero() && d >= 0 && d < max(l.trimWait, trimEvery) {
		return 0, false
	}
	l.trimmed, l.trimming = now, true
	return l.room, true
}

// trimmed ends downstream's trim; after one that churned (it moved more
// records of jobs not yet ended than half what it set out to purge: the
// room is mostly theirs) the next waits twice as long, up to
// trimBackOff, and after any other the wait is trimEvery again.
func (s *Store) trimmed(downstream string, churned bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lane(downstream)
	l.trimming = false
	if churned {
		l.trimWait = min(2*max(l.trimWait, trimEvery), trimBackOff)
	} else {
		l.trimWait = trimEvery
	}
}

// held is a record of a job not yet ended that a trim found among the
// oldest: its sequence and subject.
type held struct {
	seq     uint64
	subject string
}

// scan reads st's records from the first, headers only, through an
// ephemeral consumer, until it has seen n finished ones (those with a
// TTL), trimScan records, moveMax records of jobs not yet ended, or the
// last record of state. It returns the
// sequence below which the records it saw lie, and the records of jobs
// not yet ended among them.
func (s *Store) scan(ctx context.Context, st natsjs.Stream, state natsjs.StreamState, n uint64) (uint64, []held, error) {
	c, err := st.CreateConsumer(ctx, natsjs.ConsumerConfig{
		Description:   "shaperd: reads the oldest job records to trim them to their room",
		DeliverPolicy: natsjs.DeliverByStartSequencePolicy, OptStartSeq: state.FirstSeq,
		AckPolicy: natsjs.AckNonePolicy, HeadersOnly: true, MemoryStorage: true, Replicas: 1,
		InactiveThreshold: time.Minute,
	})
	if err != nil {
		return 0, nil, fmt.Errorf("create a consumer to read the oldest records: %w", err)
	}
	defer func() {
		// An error leaves it to the server, which removes it once idle.
		_ = st.DeleteConsumer(context.WithoutCancel(ctx), c.CachedInfo().Name)
	}()
	below, finished, scanned := state.FirstSeq, uint64(0), 0
	var live []held
	for end := false; !end && finished < n && scanned < trimScan && len(live) < moveMax; {
		batch, err := c.FetchNoWait(int(min(n-finished, uint64(trimScan-scanned), scanBatch)))
		if err != nil {
			return 0, nil, fmt.Errorf("read the oldest records: %w", err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil || md.Sequence.Stream > state.LastSeq {
				end = true // past the records measured: the rest are newer
			}
			if end || finished >= n || len(live) >= moveMax {
				continue // drain the batch
			}
			scanned++
			below = md.Sequence.Stream + 1
			if m.Headers().Get(natsjs.MsgTTLHeader) == "" {
				live = append(live, held{seq: md.Sequence.Stream, subject: m.Subject()})
			} else {
				finished++
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, natsjs.ErrNoMessages) {
			return 0, nil, fmt.Errorf("read the oldest records: %w", err)
		}
		end = end || got == 0 || below > state.LastSeq
	}
	return below, live, nil
}

// move publishes each of live, the records of jobs not yet ended below
// the sequence below, once more on its subject: the copy lands past
// below, and replaces the old one (one message per subject). Each
// publish expects the subject's last sequence to be the one read, so a
// job whose record changed since (its newer record already lies past
// below) keeps it: the server refuses, and the record is skipped. It
// returns the sequence to purge below (below, or that of the first
// record it could not move, and what went wrong), and how many it moved.
func (s *Store) move(ctx context.Context, st natsjs.Stream, live []held, below uint64) (uint64, int, error) {
	moved := 0
	for len(live) > 0 {
		chunk := live[:min(len(live), moveBatch)]
		live = live[len(chunk):]
		acks := make([]natsjs.PubAckFuture, len(chunk))
		for i, h := range chunk {
			f, err := s.again(ctx, st, h)
			if err != nil {
				return min(below, h.seq), moved, err
			}
			acks[i] = f
		}
		for i, f := range acks {
			if f == nil {
				continue // it went meanwhile
			}
			var err error
			select {
			case <-f.Ok():
				moved++
				continue
			case err = <-f.Err():
			case <-ctx.Done():
				err = ctx.Err()
			}
			if changed(err) {
				continue
			}
			return min(below, chunk[i].seq), moved, fmt.Errorf("move the record on %s past the oldest: %w", chunk[i].subject, err)
		}
	}
	return below, moved, nil
}

// again reads h's record and publishes it once more, expecting h's
// sequence last on its subject; nil when the record went meanwhile.
func (s *Store) again(ctx context.Context, st natsjs.Stream, h held) (natsjs.PubAckFuture, error) {
	m, err := st.GetMsg(ctx, h.seq)
	if errors.Is(err, natsjs.ErrMsgNotFound) {
		return nil, nil // replaced by a newer record, which lies past below
	}
	if err != nil {
		return nil, fmt.Errorf("read the record on %s to move it past the oldest: %w", h.subject, err)
	}
	f, err := s.republish(st.CachedInfo().Config.Name, m.Subject, m.Data, h.seq)
	if err != nil {
		return nil, fmt.Errorf("move the record on %s past the oldest: %w", h.subject, err)
	}
	return f, nil
}

// republish publishes data on subject of stream, expecting seq to be the
// subject's last sequence: a record that changed since is refused
// (changed).
func (s *Store) republish(stream, subject string, data []byte, seq uint64) (natsjs.PubAckFuture, error) {
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	return s.js.PublishMsgAsync(msg, natsjs.WithExpectStream(stream), natsjs.WithExpectLastSequencePerSubject(seq))
}

// changed reports a publish refused because the subject's last sequence
// was not the one expected: the record changed since it was read.
func changed(err error) bool {
	var apiErr *natsjs.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == natsjs.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == natsjs.JSErrCodeStreamWrongLastSequenceConstant)
}

// excess is how many of msgs messages of bytes in all to purge, the
// oldest finished first, so that about trimTo of room remains, when
// they fill more than trimAbove of it (room <= 0: no bound, none).
func excess(msgs, bytes uint64, room int64) uint64 {
	if room <= 0 || msgs == 0 || bytes == 0 || float64(bytes) <= trimAbove*float64(room) {
		return 0
	}
	over := float64(bytes) - trimTo*float64(room)
	n := uint64(math.Ceil(over / (float64(bytes) / float64(msgs))))
	return min(n, msgs)
}

// purge removes every message of stream below sequence below and
// returns how many it removed. nats.go's Stream.Purge does not return
// that count, so this sends the API request itself, under the JetStream
// context's API prefix or domain.
func (s *Store) purge(ctx context.Context, stream string, below uint64) (int, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmp.Or(s.js.Options().DefaultTimeout, 5*time.Second))
		defer cancel()
	}
	req, err := json.Marshal(struct {
		Seq uint64 `json:"seq"`
	}{below})
	if err != nil {
		return 0, err
	}
	subject := apiPrefix(s.js.Options()) + "STREAM.PURGE." + stream
	m, err := s.js.Conn().RequestWithContext(ctx, subject, req)
	if err != nil {
		return 0, fmt.Errorf("purge stream %s below sequence %d: %w", stream, below, err)
	}
	var resp struct {
		Error   *natsjs.APIError `json:"error"`
		Success bool             `json:"success"`
		Purged  uint64           `json:"purged"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return 0, fmt.Errorf("purge stream %s: the answer %q is not the API's: %w", stream, m.Data, err)
	}
	if resp.Error != nil {
		return 0, fmt.Errorf("purge stream %s below sequence %d: %w", stream, below, resp.Error)
	}
	if !resp.Success {
		return 0, fmt.Errorf("purge stream %s below sequence %d: the server answered %q, without success", stream, below, m.Data)
	}
	return int(resp.Purged), nil
}

// apiPrefix is the subject prefix of the JetStream API requests of a
// context with options o, ending in a dot.
func apiPrefix(o natsjs.JetStreamOptions) string {
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	}
	return natsjs.DefaultAPIPrefix
}
