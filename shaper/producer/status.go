package producer

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/shaper/outcome"
)

// Status asks shaperd what became of job jobID of downstream: a request on
// <status prefix>.<downstream>.<jobID> (see StatusPrefix), which any
// instance answers. It returns the job's record: its state, attempts,
// instants, error and the downstream's answer to the last try.
//
// A job shaperd has no record of (an id never seen, or one that ended more
// than the downstream's outcomes.keep ago, or a downstream with keep 0) is
// a Record with State outcome.Unknown, the JobID and the Downstream, and a
// nil error. Other errors are as Submit's: nats.ErrNoResponders (no
// shaperd answers status look-ups on the prefix), nats.ErrTimeout, the
// context's, or ErrBadReply.
func (c *Client) Status(ctx context.Context, downstream, jobID string) (outcome.Record, error) {
	switch {
	case !isToken(downstream):
		return outcome.Record{}, fmt.Errorf("producer: downstream %q is not a downstream name: use letters, digits, - and _", downstream)
	case jobID == "" || strings.ContainsAny(jobID, ". \t\r\n*>"):
		return outcome.Record{}, fmt.Errorf("producer: job id %q is not a job id: one subject token, without dots, spaces or wildcards", jobID)
	}
	m := nats.NewMsg(c.statusPrefix + downstream + "." + jobID)
	reply, err := c.roundTrip(ctx, m, "status look-up on")
	if err != nil {
		return outcome.Record{}, err
	}
	rec, err := parseRecord(reply)
	if err != nil {
		return outcome.Record{}, fmt.Errorf("%w on %s (headers %v)", err, m.Subject, reply.Header)
	}
	if rec.JobID == "" {
		rec.JobID = jobID
	}
	if rec.Downstream == "" {
		rec.Downstream = downstream
	}
	return rec, nil
}

// parseRecord reads a status answer: the record as JSON, the state also
// in Shaper-State (the header wins). It returns ErrBadReply when the
// answer holds no state.
func parseRecord(m *nats.Msg) (outcome.Record, error) {
	var rec outcome.Record
	jerr := json.Unmarshal(m.Data, &rec)
	if s := m.Header.Get(HeaderState); s != "" {
		rec.State = outcome.State(s)
	}
	if rec.State != outcome.Unknown && !rec.State.Valid() {
		if jerr != nil {
			return outcome.Record{}, fmt.Errorf("%w: %v", ErrBadReply, jerr)
		}
		return outcome.Record{}, fmt.Errorf("%w: state %q is not a job's state", ErrBadReply, rec.State)
	}
	return rec, nil
}

// Status is Client.Status on a Client made with opts (e.g. StatusPrefix).
func Status(ctx context.Context, nc *nats.Conn, downstream, jobID string, opts ...ClientOption) (outcome.Record, error) {
	c, err := New(nc, opts...)
	if err != nil {
		return outcome.Record{}, err
	}
	return c.Status(ctx, downstream, jobID)
}
