package natsout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/shaper/outcome"
)

// sent is one message of a record handed to the connection, awaiting
// its ack.
type sent struct {
	entry int // index in Put's entries
	ack   natsjs.PubAckFuture
}

// failures are a Put's records that were not stored, by downstream:
// which, and the first one's error.
type failures map[string]*failure

type failure struct {
	entries map[int]bool
	first   error
}

// add books entry i of downstream as not stored, for err; an entry is
// counted once, however many of its messages failed.
func (f failures) add(downstream string, i int, err error) {
	if f[downstream] == nil {
		f[downstream] = &failure{entries: map[int]bool{}, first: err}
	}
	f[downstream].entries[i] = true
}

// errs is one error per downstream.
func (f failures) errs(s *Store) []error {
	var errs []error
	for ds, x := range f {
		errs = append(errs, fmt.Errorf("store job records of %s in %s and %s: %d not stored, the first: %w",
			ds, s.StreamName(ds), s.LiveStreamName(ds), len(x.entries), x.first))
	}
	return errs
}

// Put stores entries (outcome.Store): every message is published at
// once, without waiting for the one before, and Put returns when the
// streams acknowledged them all, or ctx ended. A record of a job not yet
// ended goes to its live subject, with no TTL, so a job queued for days
// keeps its record. A final record goes to its done subject with its
// Keep as the message's TTL (whole seconds, at least 1 s: the server's
// granularity), and an empty marker with a TTL of 1 s replaces the job's
// live record. A downstream whose streams are missing (deleted, or not
// there when Ensure ran) has them made again with Ensure's settings, and
// its records published once more. The error says, for each downstream,
// how many records were not stored and why. Then the finished records of
// the downstreams written to are trimmed to their room (see trim).
func (s *Store) Put(ctx context.Context, entries []outcome.Entry) error {
	failed := failures{}
	missing := s.publish(ctx, entries, nil, failed)
	// Some downstreams' streams were missing: make them, and publish
	// those downstreams' records again, in their order.
	var again []int
	for ds, idx := range missing {
		if err := s.reensure(ctx, ds); err != nil {
			for _, i := range idx {
				failed.add(ds, i, fmt.Errorf("the streams are missing, and: %w", err))
			}
			continue
		}
		again = append(again, idx...)
	}
	if len(again) > 0 {
		slices.Sort(again)
		s.publish(ctx, entries, slices.Compact(again), failed)
	}
	for _, ds := range finished(entries) {
		if failed[ds] == nil {
			s.trim(ctx, ds)
		}
	}
	return errors.Join(failed.errs(s)...)
}

// finished is the downstreams of entries' final records.
func finished(entries []outcome.Entry) []string {
	var dss []string
	for i := range entries {
		if rec := &entries[i].Record; rec.State.Final() && !slices.Contains(dss, rec.Downstream) {
			dss = append(dss, rec.Downstream)
		}
	}
	return dss
}

// publish publishes entries' messages (only those of the entries at
// only, when it is not nil) and waits for their acks. It books what
// failed in failed, except the entries that found no stream, of
// downstreams Ensure knows, on the first try: those it returns, by
// downstream.
func (s *Store) publish(ctx context.Context, entries []outcome.Entry, only []int, failed failures) map[string][]int {
	acks := make([]sent, 0, len(entries))
	send := func(i int) {
		ms, err := s.messages(entries[i])
		for _, m := range ms {
			if err != nil {
				break
			}
			var f natsjs.PubAckFuture
			if f, err = s.js.PublishMsgAsync(m.msg, m.opts...); err == nil {
				acks = append(acks, sent{entry: i, ack: f})
			}
		}
		if err != nil {
			failed.add(entries[i].Record.Downstream, i, fmt.Errorf("job %s: %w", entries[i].Record.JobID, err))
		}
	}
	if only == nil {
		for i := range entries {
			send(i)
		}
	} else {
		for _, i := range only {
			send(i)
		}
	}
	var missing map[string][]int
	for _, a := range acks {
		rec := &entries[a.entry].Record
		var err error
		select {
		case <-a.ack.Ok():
			continue
		case err = <-a.ack.Err():
		case <-ctx.Done():
			err = fmt.Errorf("waiting for the stream's acknowledgement: %w", ctx.Err())
		}
		if only == nil && noStream(err) && s.known(rec.Downstream) {
			if missing == nil {
				missing = map[string][]int{}
			}
			missing[rec.Downstream] = append(missing[rec.Downstream], a.entry)
			continue
		}
		failed.add(rec.Downstream, a.entry, fmt.Errorf("job %s: %w", rec.JobID, err))
	}
	return missing
}

// noStream reports a publish that no stream took.
func noStream(err error) bool {
	return errors.Is(err, natsjs.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders)
}

// message is one message of a record and its publish options.
type message struct {
	msg  *nats.Msg
	opts []natsjs.PublishOpt
}

// messages are e's messages: a record of a job not yet ended on its live
// subject; a final record on its done subject, with its keep as the TTL,
// and an empty marker on its live subject that goes after 1 s.
func (s *Store) messages(e outcome.Entry) ([]message, error) {
	rec := &e.Record
	if err := token("downstream", rec.Downstream); err != nil {
		return nil, err
	}
	if err := token("job id", rec.JobID); err != nil {
		return nil, err
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	ds, id := rec.Downstream, rec.JobID
	liveOpts := []natsjs.PublishOpt{natsjs.WithExpectStream(s.LiveStreamName(ds))}
	if !rec.State.Final() {
		return []message{{msg: &nats.Msg{Subject: s.LiveSubject(ds, id), Data: data, Header: nats.Header{}}, opts: liveOpts}}, nil
	}
	return []message{
		{msg: &nats.Msg{Subject: s.DoneSubject(ds, id), Data: data, Header: nats.Header{}},
			opts: []natsjs.PublishOpt{natsjs.WithExpectStream(s.StreamName(ds)), natsjs.WithMsgTTL(ttl(e.Keep))}},
		{msg: &nats.Msg{Subject: s.LiveSubject(ds, id), Header: nats.Header{}}, opts: append(liveOpts, natsjs.WithMsgTTL(ttl(0)))},
	}, nil
}

// ttl is keep as a message TTL: whole seconds, rounded up, at least one
// (the server takes seconds and refuses less than one).
func ttl(keep time.Duration) time.Duration {
	secs := max((keep+time.Second-1)/time.Second, 1)
	return secs * time.Second
}

// known reports whether Ensure ran for downstream.
func (s *Store) known(downstream string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lanes[downstream]
	return l != nil && l.ensured
}

// reensure runs Ensure again with the settings downstream was ensured
// with.
func (s *Store) reensure(ctx context.Context, downstream string) error {
	s.mu.Lock()
	l := s.lanes[downstream]
	room, keep := l.room, l.keep
	s.mu.Unlock()
	return s.Ensure(ctx, downstream, room, keep)
}

// Get returns the record of job id of downstream (outcome.Store), read
// with direct gets of the last message on its subjects, which any of the
// streams' replicas answers: the live subject first, which holds the
// record of a job not yet ended (also one replayed after it ended), then
// the done subject. A downstream without record streams, an id that
// cannot be a subject token, and a record past its keep are ok=false
// with a nil error, and so is a record whose TTL passed that the server
// has not removed yet.
func (s *Store) Get(ctx context.Context, downstream, id string) (outcome.Record, bool, error) {
	if token("downstream", downstream) != nil || token("job id", id) != nil {
		return outcome.Record{}, false, nil
	}
	for _, p := range []part{live, done} {
		if rec, ok, err := s.read(ctx, downstream, p, id); ok || err != nil {
			return rec, ok, err
		}
	}
	return outcome.Record{}, false, nil
}

// read returns the record of job id in downstream's stream of part p; a
// live marker of a job that ended is none.
func (s *Store) read(ctx context.Context, downstream string, p part, id string) (outcome.Record, bool, error) {
	st, err := s.stream(ctx, downstream, p)
	if err != nil || st == nil {
		return outcome.Record{}, false, err
	}
	m, err := st.GetLastMsgForSubject(ctx, s.subject(downstream, p, id))
	switch {
	case errors.Is(err, natsjs.ErrMsgNotFound):
		return outcome.Record{}, false, nil
	case errors.Is(err, nats.ErrNoResponders) || errors.Is(err, natsjs.ErrStreamNotFound):
		s.forget(downstream, p) // the stream went: look it up again next time
		return outcome.Record{}, false, nil
	case err != nil:
		return outcome.Record{}, false, fmt.Errorf("read job record %s of %s in %s: %w", id, downstream, s.streamName(downstream, p), err)
	}
	if len(m.Data) == 0 || expired(m, s.now()) {
		return outcome.Record{}, false, nil
	}
	var rec outcome.Record
	if err := json.Unmarshal(m.Data, &rec); err != nil {
		return outcome.Record{}, false, fmt.Errorf("read job record %s of %s: not a record (%q): %w",
			id, downstream, m.Data, err)
	}
	return rec, true, nil
}

// expired reports whether m's TTL has passed at now: the server removes
// such a message soon after, not at once.
func expired(m *natsjs.RawStreamMsg, now time.Time) bool {
	d, err := time.ParseDuration(m.Header.Get(natsjs.MsgTTLHeader))
	return err == nil && !now.Before(m.Time.Add(d))
}

// Records is how many records downstream's streams hold (the
// shaper_outcome_records gauge): one per job, of every instance, and for
// a second after a job ends two (its finished record and the marker that
// replaced its live one).
func (s *Store) Records(ctx context.Context, downstream string) (int, error) {
	n := 0
	for _, p := range []part{done, live} {
		st, err := s.stream(ctx, downstream, p)
		if err != nil || st == nil {
			if err != nil {
				return 0, err
			}
			continue
		}
		info, err := st.Info(ctx)
		if errors.Is(err, natsjs.ErrStreamNotFound) {
			s.forget(downstream, p)
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("count job records of %s in %s: %w", downstream, s.streamName(downstream, p), err)
		}
		n += int(info.State.Msgs)
	}
	return n, nil
}

// stream returns downstream's record stream of part p, looked up once;
// nil (and no error) when there is none.
func (s *Store) stream(ctx context.Context, downstream string, p part) (natsjs.Stream, error) {
	s.mu.Lock()
	l := s.lanes[downstream]
	var st natsjs.Stream
	if l != nil {
		st = l.s[p]
	}
	s.mu.Unlock()
	if st != nil {
		return st, nil
	}
	name := s.streamName(downstream, p)
	st, err := s.js.Stream(ctx, name)
	switch {
	case errors.Is(err, natsjs.ErrStreamNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("look up the job records of %s in %s: %w", downstream, name, err)
	}
	s.mu.Lock()
	s.lane(downstream).s[p] = st
	s.mu.Unlock()
	return st, nil
}

// forget drops the handle of downstream's stream of part p.
func (s *Store) forget(downstream string, p part) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.lanes[downstream]; l != nil {
		l.s[p] = nil
	}
}
