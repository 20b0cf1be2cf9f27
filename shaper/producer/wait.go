package producer

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/shaper/outcome"
)

// The status look-ups of SubmitAndWait while it waits for an outcome: the
// first after about firstPoll, doubling up to maxPoll (with equal jitter).
// They find an outcome that was lost (published while the connection was
// down) or that went elsewhere (a duplicate's).
const (
	firstPoll = time.Second
	maxPoll   = 30 * time.Second
)

// Outcome is what became of a job SubmitAndWait sent: the accept reply,
// then how the job ended, from the outcome shaperd published on
// Shaper-Reply-To or, when that did not come, from a status look-up.
type Outcome struct {
	// Accepted is shaperd's answer to the job itself (Result.Duplicate:
	// a repeated Nats-Msg-Id, whose outcome was read with Status).
	Accepted Result
	JobID    string
	// State is one of the final states (succeeded, failed, expired,
	// dropped) once the job ended. When SubmitAndWait returns an error
	// after the accept, it is the last state a look-up saw, or empty.
	State outcome.State
	// Attempt is the number of the last try (0: the job never started).
	Attempt int
	// StatusCode is the downstream's HTTP status on the last try (0: a
	// NATS downstream, or no answer).
	StatusCode int
	// Error is why the job did not succeed, shaperd's words.
	Error string
	// ContentType and Body are the downstream's answer to the last try:
	// its Content-Type and the first outcomes.result_bytes of its body.
	ContentType string
	Body        []byte
	// SentAt is when the job was sent, EndedAt when it ended and Latency
	// its time from accepted to ended, queue and every try included. From
	// an outcome on Shaper-Reply-To they are as the producer saw them:
	// EndedAt is the outcome's arrival, Latency EndedAt − SentAt. From a
	// look-up (which may come up to 30s after the end) they are the
	// record's, on shaperd's clock: EndedAt is its ended_at, Latency
	// ended_at − accepted_at (for a Duplicate, the first job's).
	SentAt, EndedAt time.Time
	Latency         time.Duration
	// Record is the job's record when the outcome came from a status
	// look-up rather than on Shaper-Reply-To; nil otherwise.
	Record *outcome.Record
}

// SubmitAndWait sends one job for downstream and waits until it ends:
// succeeded, failed, expired or dropped. It listens on one new inbox of
// the connection (a subscription to <inbox>.*, removed on return): the
// request's reply comes to <inbox>.accept and the job carries
// Shaper-Reply-To <inbox>.outcome (a ReplyTo option is overridden), so
// the accept and then the outcome arrive there.
//
// The accept is waited for as Submit waits for its reply (the client's
// Timeout under ctx); a rejection returns at once, with the Result in
// Outcome.Accepted and the same error as Submit. A Duplicate's outcome
// went to the first job's Shaper-Reply-To, so it is read with Status,
// polled until the job ends. While waiting for an outcome, SubmitAndWait
// also looks the job up now and then (after about 1s, doubling to 30s),
// so an outcome lost while the connection was down is found all the same;
// a look-up that fails is retried at the next turn.
//
// SubmitAndWait has no timeout of its own for the outcome: a job may
// rightly wait in its queue for hours (a paused downstream, a delay, a
// long backlog), and only the caller knows how long its answer is worth
// waiting for. Give ctx a deadline in production, or a producer whose job
// never ends (an outcome lost on a daemon that keeps no records) waits
// forever. When ctx ends, the error matches the context's (errors.Is) and
// the Outcome holds the accept and the last state a look-up saw. Like
// Submit, it ignores the options of SubmitRetry and does not retry.
func (c *Client) SubmitAndWait(ctx context.Context, downstream string, payload []byte, opts ...Option) (Outcome, error) {
	m, _, err := c.message(downstream, payload, opts)
	if err != nil {
		return Outcome{}, err
	}
	w := &waiter{c: c, downstream: downstream, msgs: make(chan *nats.Msg, 16)}
	inbox := c.nc.NewInbox()
	sub, err := c.nc.ChanSubscribe(inbox+".*", w.msgs)
	if err != nil {
		return Outcome{}, fmt.Errorf("producer: subscribe to the inbox %s.*: %w", inbox, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	w.accept, w.outcome = inbox+".accept", inbox+".outcome"
	m.Reply = w.accept
	m.Header.Set(HeaderReplyTo, w.outcome)
	w.sentAt = time.Now()
	if err := c.nc.PublishMsg(m); err != nil {
		return Outcome{}, fmt.Errorf("producer: submit to %s: %w", m.Subject, err)
	}
	res, err := w.waitAccept(ctx, m.Subject)
	o := Outcome{Accepted: res, JobID: res.JobID, SentAt: w.sentAt}
	if err != nil {
		return o, err
	}
	return w.waitOutcome(ctx, o)
}

// waiter is one SubmitAndWait: its inbox's subjects and messages.
type waiter struct {
	c               *Client
	downstream      string
	msgs            chan *nats.Msg
	accept, outcome string
	sentAt          time.Time
	early           *nats.Msg // an outcome that came before the accept
	polls           int       // look-ups so far
	lastState       outcome.State
	lookupErr       error
}

// waitAccept waits for the accept reply, under the client's timeout, and
// parses it as Submit does.
func (w *waiter) waitAccept(ctx context.Context, subject string) (Result, error) {
	actx := ctx
	if w.c.timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, w.c.timeout)
		defer cancel()
	}
	for {
		select {
		case m := <-w.msgs:
			if m.Subject == w.outcome {
				w.early = m
				continue
			}
			if isNoResponders(m) {
				return Result{}, fmt.Errorf("producer: submit to %s: %w", subject, nats.ErrNoResponders)
			}
			res, err := parseReply(m)
			if errors.Is(err, ErrBadReply) {
				return res, fmt.Errorf("%w on %s (headers %v)", err, subject, m.Header)
			}
			return res, err
		case <-actx.Done():
			if ctx.Err() != nil {
				return Result{}, fmt.Errorf("producer: submit to %s: %w", subject, context.Cause(ctx))
			}
			return Result{}, fmt.Errorf("producer: submit to %s: no reply within %s: %w", subject, w.c.timeout, nats.ErrTimeout)
		}
	}
}

// isNoResponders reports whether m is the server's answer to a request
// nobody subscribes to: status 503 and no body (nats.go's own test, whose
// names it does not export).
func isNoResponders(m *nats.Msg) bool {
	return len(m.Data) == 0 && m.Header.Get("Status") == "503"
}

// waitOutcome waits for the outcome of the accepted job o.JobID: on the
// inbox, or from a status look-up, until ctx ends. A duplicate is looked
// up at once, and then only looked up.
func (w *waiter) waitOutcome(ctx context.Context, o Outcome) (Outcome, error) {
	if w.early != nil && w.fromMessage(&o, w.early) {
		return o, nil
	}
	first := time.Duration(0)
	if !o.Accepted.Duplicate {
		first = w.nextPoll()
	}
	poll := time.NewTimer(first)
	defer poll.Stop()
	for {
		select {
		case m := <-w.msgs:
			if m.Subject == w.outcome && w.fromMessage(&o, m) {
				return o, nil
			}
		case <-poll.C:
			if w.fromLookup(ctx, &o) {
				return o, nil
			}
			poll.Reset(w.nextPoll())
		case <-ctx.Done():
			o.State = w.lastState
			return o, w.stopped(ctx, o)
		}
	}
}

// stopped is the error when ctx ended before the job did.
func (w *waiter) stopped(ctx context.Context, o Outcome) error {
	last := "no look-up yet"
	switch {
	case w.lookupErr != nil:
		last = "last look-up failed: " + w.lookupErr.Error()
	case w.lastState == outcome.Unknown:
		last = "last look-up: unknown (shaperd keeps no record of it: outcomes.keep is 0, or it ended longer ago)"
	case w.lastState != "":
		last = "last look-up: " + string(w.lastState)
	}
	return fmt.Errorf("producer: waiting for job %s of %s (%s) stopped: %w", o.JobID, w.downstream, last, context.Cause(ctx))
}

// nextPoll is the wait before the next look-up: firstPoll·2ⁿ up to
// maxPoll, with equal jitter.
func (w *waiter) nextPoll() time.Duration {
	d := maxPoll
	if w.polls < 10 && firstPoll<<w.polls < maxPoll {
		d = firstPoll << w.polls
	}
	w.polls++
	return d/2 + time.Duration(mrand.Float64()*float64(d/2))
}

// fromMessage fills o from an outcome message and reports whether it was
// one: a final state, for o's job.
func (w *waiter) fromMessage(o *Outcome, m *nats.Msg) bool {
	state := outcome.State(m.Header.Get(HeaderState))
	if id := m.Header.Get(HeaderJobID); !state.Final() || (id != "" && id != o.JobID) {
		return false
	}
	o.State, o.Error, o.ContentType, o.Body = state, m.Header.Get(HeaderError), m.Header.Get(HeaderContentType), m.Data
	o.Attempt, _ = strconv.Atoi(m.Header.Get(HeaderAttempt))
	o.StatusCode, _ = strconv.Atoi(m.Header.Get(HeaderStatusCode))
	o.EndedAt = time.Now()
	o.Latency = o.EndedAt.Sub(o.SentAt)
	return true
}

// fromLookup looks o's job up and, when it has ended, fills o from its
// record and reports true.
func (w *waiter) fromLookup(ctx context.Context, o *Outcome) bool {
	rec, err := w.c.Status(ctx, w.downstream, o.JobID)
	if err != nil {
		w.lookupErr = err
		return false
	}
	w.lookupErr, w.lastState = nil, rec.State
	if !rec.State.Final() {
		return false
	}
	o.State, o.Attempt, o.Error, o.Record = rec.State, rec.Attempts, rec.Error, &rec
	if r := rec.Result; r != nil {
		o.StatusCode, o.ContentType, o.Body = r.StatusCode, r.ContentType(), r.Body
	}
	o.EndedAt, o.Latency = rec.EndedAt, rec.EndedAt.Sub(rec.AcceptedAt)
	if rec.EndedAt.IsZero() || rec.AcceptedAt.IsZero() {
		o.EndedAt = time.Now()
		o.Latency = o.EndedAt.Sub(o.SentAt)
	}
	return true
}

// SubmitAndWait is Client.SubmitAndWait on a Client with the defaults
// (subject prefix shaper.jobs, status prefix shaper.status, key header
// Shaper-Key, timeout 5s for the accept).
func SubmitAndWait(ctx context.Context, nc *nats.Conn, downstream string, payload []byte, opts ...Option) (Outcome, error) {
	c, err := New(nc)
	if err != nil {
		return Outcome{}, err
	}
	return c.SubmitAndWait(ctx, downstream, payload, opts...)
}
