package natsout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/shaper/outcome"
)

// DefaultStatusPrefix is the status prefix of a Responder given none.
const DefaultStatusPrefix = "shaper.status"

const (
	// unknownDelay is how long an instance that does not know a job of a
	// downstream whose records are its own (memory) waits before it says
	// so. Every instance receives a status request; the one that knows the
	// job answers at once, and the requester takes the first reply, so
	// the others' "unknown" must come later. If no instance knows it, the
	// requester gets "unknown" after this.
	unknownDelay = 200 * time.Millisecond
	// maxLookups bounds the look-ups in flight; a request past it is
	// answered "busy" at once.
	maxLookups = 64
	// maxDelayed bounds the delayed "unknown" answers waiting; a request
	// past it is answered "busy" at once.
	maxDelayed = 1024
	// lookupTimeout bounds one look-up.
	lookupTimeout = 5 * time.Second
)

// errBusy answers a request past maxLookups or maxDelayed.
var errBusy = errors.New("busy: too many status requests in flight on this instance; ask again shortly")

// Lookup finds job id of downstream's record; ok is false when there is
// none, and shared says whether downstream's records are shared by every
// instance (a JetStream store) rather than each instance's own (memory).
type Lookup func(ctx context.Context, downstream, id string) (rec outcome.Record, ok, shared bool, err error)

// ResponderSettings configure a Responder; zero fields take the defaults.
type ResponderSettings struct {
	StatusPrefix string // requests on <StatusPrefix>.<downstream>.<id>; "" = DefaultStatusPrefix
	Lookup       Lookup // required
	Logger       *slog.Logger
}

// Responder answers job status requests, on every instance (a plain
// subscription, not a queue group): reply header Shaper-State and the
// record as JSON, or {"job_id":…,"state":"unknown"}. An id unknown here
// of a downstream whose records are not shared is answered only after
// unknownDelay, so that an instance that knows it answers first. A
// look-up that fails, or a request past the bounds, is answered with
// {"job_id":…,"state":"unknown","error":…} and the header Shaper-Error
// (no Shaper-State). Look-ups run off the subscription's goroutine, at
// most maxLookups at once. A request without a reply subject is ignored.
// It is a service (Start, Stop).
type Responder struct {
	nc     *nats.Conn
	prefix string
	lookup Lookup
	log    *slog.Logger

	ctx    context.Context // the look-ups'; cancelled by Stop
	cancel context.CancelFunc
	sem    chan struct{} // a slot per look-up in flight
	wg     sync.WaitGroup

	mu      sync.Mutex
	sub     *nats.Subscription
	started bool
	stopped bool
	timers  map[*time.Timer]struct{} // delayed answers not yet sent
}

// NewResponder prepares a Responder on nc; it does no I/O.
func NewResponder(nc *nats.Conn, s ResponderSettings) (*Responder, error) {
	if s.Lookup == nil {
		return nil, errors.New("natsout: a responder needs a Lookup")
	}
	if s.StatusPrefix == "" {
		s.StatusPrefix = DefaultStatusPrefix
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Responder{
		nc: nc, prefix: s.StatusPrefix, lookup: s.Lookup, log: s.Logger,
		ctx: ctx, cancel: cancel, sem: make(chan struct{}, maxLookups),
		timers: map[*time.Timer]struct{}{},
	}, nil
}

// Start subscribes to <StatusPrefix>.*.* and, when connected, returns
// once the server has the subscription (waiting at most lookupTimeout
// when ctx has no deadline). ctx bounds the start only.
func (r *Responder) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.stopped:
		return ErrStopped
	case r.started:
		return ErrStarted
	}
	subject := r.prefix + ".*.*"
	sub, err := r.nc.Subscribe(subject, r.handle)
	if err != nil {
		return fmt.Errorf("natsout: subscribe to status requests on %s: %w", subject, err)
	}
	if _, ok := ctx.Deadline(); !ok { // the client wants one
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, lookupTimeout)
		defer cancel()
	}
	// Offline (NATS not reachable yet) the subscription is sent once the
	// connection is made; a Flush would only wait out its timeout.
	if r.nc.IsConnected() {
		if err := r.nc.FlushWithContext(ctx); err != nil {
			_ = sub.Unsubscribe()
			return fmt.Errorf("natsout: subscribe to status requests on %s: %w", subject, err)
		}
	}
	r.sub, r.started = sub, true
	return nil
}

// Stop unsubscribes, drops the delayed answers not yet sent, cancels the
// look-ups in flight and waits for them. It is idempotent.
func (r *Responder) Stop() error {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return nil
	}
	r.stopped = true
	sub := r.sub
	for t := range r.timers {
		if t.Stop() { // its func never runs: its share of wg is ours to end
			r.wg.Done()
		}
	}
	clear(r.timers)
	r.mu.Unlock()
	var err error
	if sub != nil {
		if err = sub.Unsubscribe(); errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrBadSubscription) {
			err = nil // the connection went first: nothing more comes
		}
	}
	r.cancel()
	r.wg.Wait()
	if err != nil {
		return fmt.Errorf("natsout: stop answering status requests: %w", err)
	}
	return nil
}

// handle takes one request, on the subscription's goroutine: it starts
// its look-up, or answers busy.
func (r *Responder) handle(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	rest, ok := strings.CutPrefix(m.Subject, r.prefix+".")
	ds, id, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return
	}
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	select {
	case r.sem <- struct{}{}:
	default:
		r.mu.Unlock()
		r.fail(m, id, errBusy)
		return
	}
	r.wg.Add(1)
	r.mu.Unlock()
	go r.answer(m, ds, id)
}

// answer looks id up and answers m.
func (r *Responder) answer(m *nats.Msg, ds, id string) {
	defer r.wg.Done()
	ctx, cancel := context.WithTimeout(r.ctx, lookupTimeout)
	rec, ok, shared, err := r.lookup(ctx, ds, id)
	cancel()
	<-r.sem
	switch {
	case err != nil:
		r.fail(m, id, fmt.Errorf("look up job %s of %s: %w", id, ds, err))
	case ok:
		r.reply(m, rec.State, &rec)
	case shared:
		r.reply(m, outcome.Unknown, unknown{JobID: id, State: outcome.Unknown})
	default:
		r.later(m, id)
	}
}

// later answers m unknown after unknownDelay, unless Stop comes first.
func (r *Responder) later(m *nats.Msg, id string) {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	if len(r.timers) >= maxDelayed {
		r.mu.Unlock()
		r.fail(m, id, errBusy)
		return
	}
	r.wg.Add(1)
	var t *time.Timer
	t = time.AfterFunc(unknownDelay, func() {
		defer r.wg.Done()
		r.mu.Lock()
		_, live := r.timers[t]
		delete(r.timers, t)
		r.mu.Unlock()
		if live {
			r.reply(m, outcome.Unknown, unknown{JobID: id, State: outcome.Unknown})
		}
	})
	r.timers[t] = struct{}{}
	r.mu.Unlock()
}

// unknown is the body of an answer without a record.
type unknown struct {
	JobID string        `json:"job_id"`
	State outcome.State `json:"state"`
	Error string        `json:"error,omitempty"`
}

// reply answers m with body as JSON and the header Shaper-State.
func (r *Responder) reply(m *nats.Msg, state outcome.State, body any) {
	out := &nats.Msg{Subject: m.Reply, Header: nats.Header{}}
	out.Header.Set(HeaderState, string(state))
	r.send(out, body)
}

// fail answers m with err: unknown, the error in the body and the
// header Shaper-Error.
func (r *Responder) fail(m *nats.Msg, id string, err error) {
	out := &nats.Msg{Subject: m.Reply, Header: nats.Header{}}
	out.Header.Set(HeaderError, oneLine(err.Error(), MaxErrorHeader))
	r.send(out, unknown{JobID: id, State: outcome.Unknown, Error: err.Error()})
}

// send publishes out with body as JSON.
func (r *Responder) send(out *nats.Msg, body any) {
	data, err := json.Marshal(body)
	if err == nil {
		out.Data = data
		err = r.nc.PublishMsg(out)
	}
	if err != nil {
		r.log.Debug("status answer not sent", "reply", out.Subject, "err", err)
	}
}
