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
		errs = append(errs, fmt.Errorf("store job records of %s in %s: %d not stored, the first: %w",
			ds, s.StreamName(ds), len(x.entries), x.first))
	}
	return errs
}

// Put stores entries (outcome.Store): each record is one message on its
// job's subject, which replaces the job's earlier record; all are
// published at once, without waiting for the one before, and Put
// returns when the streams acknowledged them all, or ctx ended. A record
// of a job not yet ended has no TTL, so a job queued for days keeps its
// record; a final record carries its Keep as the message's TTL (whole
// seconds, at least 1 s: the server's granularity). A downstream whose
// stream is missing (deleted, or not there when Ensure ran) has it made
// again with Ensure's settings, and its records published once more.
// The error says, for each downstream, how many records were not stored
// and why. Then the finished records of the downstreams written to are
// trimmed to their room (see trim).
func (s *Store) Put(ctx context.Context, entries []outcome.Entry) error {
	failed := failures{}
	missing := s.publish(ctx, entries, nil, failed)
	// Some downstreams' streams were missing: make them, and publish
	// those downstreams' records again, in their order.
	var again []int
	for ds, idx := range missing {
		if err := s.reensure(ctx, ds); err != nil {
			for _, i := range idx {
				failed.add(ds, i, fmt.Errorf("the stream is missing, and: %w", err))
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
		m, err := s.message(entries[i])
		if err == nil {
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

// message is a record's message and its publish options.
type message struct {
	msg  *nats.Msg
	opts []natsjs.PublishOpt
}

// message is e's message, on its job's subject: a final record's with
// its keep as the TTL, a record of a job not yet ended with none.
func (s *Store) message(e outcome.Entry) (message, error) {
	rec := &e.Record
	if err := token("downstream", rec.Downstream); err != nil {
		return message{}, err
	}
	if err := token("job id", rec.JobID); err != nil {
		return message{}, err
	}
	data, err := appendRecord(make([]byte, 0, 512), rec) // json.Marshal's bytes, cheaper
	if err != nil {
		return message{}, err
	}
	ds := rec.Downstream
	m := message{msg: &nats.Msg{Subject: s.Subject(ds, rec.JobID), Data: data, Header: nats.Header{}},
		opts: []natsjs.PublishOpt{natsjs.WithExpectStream(s.StreamName(ds))}}
	if rec.State.Final() {
		m.opts = append(m.opts, natsjs.WithMsgTTL(ttl(e.Keep)))
	}
	return m, nil
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
// with a direct get of the last message on its subject, which any of the
// stream's replicas answers. A downstream without a record stream, an id
// that cannot be a subject token, and a record past its keep are
// ok=false with a nil error, and so is a record whose TTL passed that
// the server has not removed yet.
func (s *Store) Get(ctx context.Context, downstream, id string) (outcome.Record, bool, error) {
	if token("downstream", downstream) != nil || token("job id", id) != nil {
		return outcome.Record{}, false, nil
	}
	st, err := s.stream(ctx, downstream)
	if err != nil || st == nil {
		return outcome.Record{}, false, err
	}
	m, err := st.GetLastMsgForSubject(ctx, s.Subject(downstream, id))
	switch {
	case errors.Is(err, natsjs.ErrMsgNotFound):
		return outcome.Record{}, false, nil
	case errors.Is(err, nats.ErrNoResponders) || errors.Is(err, natsjs.ErrStreamNotFound):
		s.forget(downstream) // the stream went: look it up again next time
		return outcome.Record{}, false, nil
	case err != nil:
		return outcome.Record{}, false, fmt.Errorf("read job record %s of %s in %s: %w", id, downstream, s.StreamName(downstream), err)
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

// Records is how many records downstream's stream holds (the
// shaper_outcome_records gauge): one per job, of every instance.
func (s *Store) Records(ctx context.Context, downstream string) (int, error) {
	st, err := s.stream(ctx, downstream)
	if err != nil || st == nil {
		return 0, err
	}
	info, err := st.Info(ctx)
	if errors.Is(err, natsjs.ErrStreamNotFound) {
		s.forget(downstream)
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("count job records of %s in %s: %w", downstream, s.StreamName(downstream), err)
	}
	return int(info.State.Msgs), nil
}

// stream returns downstream's record stream, looked up once; nil (and
// no error) when there is none.
func (s *Store) stream(ctx context.Context, downstream string) (natsjs.Stream, error) {
	s.mu.Lock()
	var st natsjs.Stream
	if l := s.lanes[downstream]; l != nil {
		st = l.s
	}
	s.mu.Unlock()
	if st != nil {
		return st, nil
	}
	name := s.StreamName(downstream)
	st, err := s.js.Stream(ctx, name)
	switch {
	case errors.Is(err, natsjs.ErrStreamNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("look up the job records of %s in %s: %w", downstream, name, err)
	}
	s.mu.Lock()
	s.lane(downstream).s = st
	s.mu.Unlock()
	return st, nil
}

// forget drops the handle of downstream's stream.
func (s *Store) forget(downstream string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.lanes[downstream]; l != nil {
		l.s = nil
	}
}
