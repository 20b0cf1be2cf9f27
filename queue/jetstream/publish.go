package jetstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// Tuning of the intake's stores.
const (
	// ackTimeout answers a store whose PubAck has not come (lost with a
	// connection, a server that stopped answering) with errAckTimeout.
	ackTimeout = 10 * time.Second
	// stallWait is how long a store waits for room in a full window
	// before it is answered errStalled: a store that cannot keep up
	// refuses jobs quickly (unavailable, Retry-After) rather than make
	// the intake wait.
	stallWait = 200 * time.Millisecond
	// noResponderTries and noResponderWait: a stream without a leader
	// (elected, or the stream being created) answers "no responders";
	// the store is sent again after noResponderWait, up to this many
	// times, as nats.go's async publisher does.
	noResponderTries = 2
	noResponderWait  = 250 * time.Millisecond
)

// publisher sends the intake's stores of every queue of a Store and
// answers each from its own PubAck, pipelined: a store is sent at once,
// whatever is in flight, and the connection's writer sends what
// accumulated in one write, so under load many stores share a round trip
// and a lone one waits for none. At most MaxPending stores await their
// PubAck.
//
// It does what nats.go's PublishMsgAsync does with less per store: one
// reply subscription (<inbox>.<token>, the token a counter), the pending
// stores in one map, one timer for all of them (armed for the oldest)
// instead of one per store, and the PubAck read by hand in the shape the
// server writes for a stored message (anything else through
// encoding/json). Safe for concurrent use.
type publisher struct {
	nc      *nats.Conn
	timeout time.Duration                   // ackTimeout; shorter in tests
	window  chan struct{}                   // one slot per store awaiting its PubAck
	answer  func(pendingPub, pubAck, error) // runs once per store, never under mu

	mu      sync.Mutex
	prefix  string // reply subjects: prefix + token; "" until the first store
	next    uint64 // the next store's token
	oldest  uint64 // no token below it is pending
	pending map[uint64]*outstanding
	expiry  *time.Timer // armed for the oldest pending store while there is one
	armed   bool
}

// outstanding is a store awaiting its PubAck.
type outstanding struct {
	msg   *nats.Msg
	p     pendingPub
	sent  time.Time
	tries int // "no responders" answers so far
	slots int // of the window: 1, or an atomic batch's messages
}

// pubAck is what the intake needs of a PubAck.
type pubAck struct {
	seq       uint64
	duplicate bool
	// batch and count are an atomic batch's: its id and how many messages
	// it stored, seq being the last one's.
	batch string
	count uint64
}

func newPublisher(nc *nats.Conn, maxPending int, answer func(pendingPub, pubAck, error)) *publisher {
	return &publisher{nc: nc, timeout: ackTimeout, window: make(chan struct{}, maxPending), answer: answer,
		pending: map[uint64]*outstanding{}}
}

// publish sends m, stored for p; answer gets the PubAck's answer. It
// waits up to stallWait for room in the window. The error is the send's
// (then answer is not called).
func (pb *publisher) publish(m *nats.Msg, p pendingPub) error {
	return pb.publishAll([]*nats.Msg{m}, p)
}

// publishAll sends msgs in order, the last awaiting a PubAck for p (an
// atomic batch: the earlier ones are sent without a reply subject, so the
// server answers only the commit). The store holds one slot of the window
// per message, up to the whole window, until it is answered: a batch of n
// jobs weighs on the window as n stores do. It waits up to stallWait for
// that room. The error is the send's (then answer is not called).
func (pb *publisher) publishAll(msgs []*nats.Msg, p pendingPub) error {
	slots := min(len(msgs), cap(pb.window))
	if !pb.acquire(slots) {
		return errStalled
	}
	m := msgs[len(msgs)-1]
	o := &outstanding{msg: m, p: p, slots: slots}
	pb.mu.Lock()
	if err := pb.startLocked(); err != nil {
		pb.mu.Unlock()
		pb.release(slots)
		return err
	}
	token := pb.next
	pb.next++
	o.sent = time.Now() // under mu: tokens grow with the time sent (see expire)
	pb.pending[token] = o
	m.Reply = pb.prefix + strconv.FormatUint(token, 10)
	pb.armLocked(o.sent)
	pb.mu.Unlock()
	for _, m := range msgs {
		if err := pb.nc.PublishMsg(m); err != nil {
			if pb.take(token) != nil {
				pb.release(slots)
				return err
			}
			return nil // the sweep or a dropped connection answered it meanwhile
		}
	}
	return nil
}

// acquire takes n slots of the window, waiting up to stallWait for them;
// false: it took none.
func (pb *publisher) acquire(n int) bool {
	var t *time.Timer
	for i := range n {
		select {
		case pb.window <- struct{}{}:
			continue
		default:
		}
		if t == nil {
			t = time.NewTimer(stallWait)
		}
		select {
		case pb.window <- struct{}{}:
		case <-t.C:
			pb.release(i)
			return false
		}
	}
	if t != nil {
		t.Stop()
	}
	return true
}

// release frees n slots of the window.
func (pb *publisher) release(n int) {
	for range n {
		<-pb.window
	}
}

// startLocked subscribes to the replies and starts watching the
// connection, once. Requires pb.mu.
func (pb *publisher) startLocked() error {
	if pb.prefix != "" {
		return nil
	}
	prefix := pb.nc.NewInbox() + "."
	onReply := func(m *nats.Msg) { pb.onReply(prefix, m) }
	if _, err := pb.nc.Subscribe(prefix+"*", onReply); err != nil {
		return fmt.Errorf("subscribe to acknowledgements: %w", err)
	}
	pb.prefix = prefix
	status := pb.nc.StatusChanged(nats.RECONNECTING, nats.CLOSED)
	if pb.nc.IsClosed() { // closed before it listened: no CLOSED will come
		pb.nc.RemoveStatusListener(status)
	}
	go pb.watch(status) // ends when the connection closes
	return nil
}

// watch answers every pending store with nats.ErrDisconnected when the
// connection drops (their PubAcks went to the connection that is gone)
// and returns once it is closed (status is then closed, or delivers
// CLOSED).
func (pb *publisher) watch(status chan nats.Status) {
	for s := range status {
		pb.failAll(nats.ErrDisconnected)
		if s == nats.CLOSED {
			return
		}
	}
}

func (pb *publisher) failAll(err error) {
	pb.mu.Lock()
	failed := make([]*outstanding, 0, len(pb.pending))
	for token, o := range pb.pending {
		failed = append(failed, o)
		delete(pb.pending, token)
	}
	pb.oldest = pb.next
	pb.mu.Unlock()
	for _, o := range failed {
		pb.finish(o, pubAck{}, err)
	}
}

// take removes and returns the store with token, nil if it was answered.
func (pb *publisher) take(token uint64) *outstanding {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	o := pb.pending[token]
	delete(pb.pending, token)
	return o
}

// finish frees o's slots and answers it.
func (pb *publisher) finish(o *outstanding, a pubAck, err error) {
	pb.release(o.slots)
	pb.answer(o.p, a, err)
}

// onReply runs on the reply subscription's goroutine: it answers the
// store the reply names.
func (pb *publisher) onReply(prefix string, m *nats.Msg) {
	token, ok := parseDigits(m.Subject[min(len(prefix), len(m.Subject)):])
	if !ok {
		return
	}
	if len(m.Data) == 0 && m.Header.Get("Status") == "503" { // no responders
		pb.noResponders(token)
		return
	}
	o := pb.take(token)
	if o == nil {
		return // answered already: timed out, or the connection dropped
	}
	a, err := parsePubAck(m.Data)
	pb.finish(o, a, err)
}

// noResponders sends the store with token again after noResponderWait,
// or answers it natsjs.ErrNoStreamResponse after noResponderTries.
func (pb *publisher) noResponders(token uint64) {
	pb.mu.Lock()
	o := pb.pending[token]
	retry := o != nil && o.tries < noResponderTries
	if retry {
		o.tries++
	} else {
		delete(pb.pending, token)
	}
	pb.mu.Unlock()
	switch {
	case o == nil:
	case retry:
		time.AfterFunc(noResponderWait, func() {
			pb.mu.Lock()
			answered := pb.pending[token] != o
			pb.mu.Unlock()
			if answered { // timed out meanwhile, or the connection dropped
				return
			}
			if err := pb.nc.PublishMsg(o.msg); err != nil {
				if o := pb.take(token); o != nil {
					pb.finish(o, pubAck{}, err)
				}
			}
		})
	default:
		pb.finish(o, pubAck{}, natsjs.ErrNoStreamResponse)
	}
}

// armLocked arms the expiry timer for a store sent at sent unless it is
// armed (for an older one). Requires pb.mu.
func (pb *publisher) armLocked(sent time.Time) {
	if pb.armed {
		return
	}
	pb.armed = true
	d := time.Until(sent.Add(pb.timeout))
	if pb.expiry == nil {
		pb.expiry = time.AfterFunc(d, pb.expire)
		return
	}
	pb.expiry.Reset(d)
}

// expire answers the stores older than the timeout with errAckTimeout and
// arms the timer for the oldest one left. Tokens grow with the time a
// store was sent, so it walks from the oldest and stops at the first one
// still in time.
func (pb *publisher) expire() {
	now := time.Now()
	var expired []*outstanding
	pb.mu.Lock()
	pb.armed = false
	for ; pb.oldest < pb.next; pb.oldest++ {
		o, ok := pb.pending[pb.oldest]
		if !ok {
			continue
		}
		if now.Sub(o.sent) < pb.timeout {
			pb.armLocked(o.sent)
			break
		}
		expired = append(expired, o)
		delete(pb.pending, pb.oldest)
	}
	pb.mu.Unlock()
	for _, o := range expired {
		pb.finish(o, pubAck{}, errAckTimeout)
	}
}

// parsePubAck reads a PubAck: the store's sequence, whether it was a
// duplicate, an atomic batch's id and count, or the store's refusal (a
// *natsjs.APIError).
func parsePubAck(data []byte) (pubAck, error) {
	if a, ok := parseStored(data); ok {
		return a, nil
	}
	var r struct {
		Stream    string           `json:"stream"`
		Seq       uint64           `json:"seq"`
		Duplicate bool             `json:"duplicate"`
		Batch     string           `json:"batch"`
		Count     uint64           `json:"count"`
		Error     *natsjs.APIError `json:"error"`
	}
	switch err := json.Unmarshal(data, &r); {
	case err != nil:
		return pubAck{}, natsjs.ErrInvalidJSAck
	case r.Error != nil:
		return pubAck{}, r.Error
	case r.Stream == "":
		return pubAck{}, natsjs.ErrInvalidJSAck
	}
	return pubAck{seq: r.Seq, duplicate: r.Duplicate, batch: r.Batch, count: r.Count}, nil
}

// parseStored reads the PubAck of a stored message exactly as the server
// writes it, {"stream":"<name>","seq":<n>}, without reflection; ok is
// false for any other shape (a duplicate, a domain, an error), which
// parsePubAck leaves to encoding/json.
func parseStored(b []byte) (pubAck, bool) {
	const head, seq = `{"stream":"`, `","seq":`
	if !bytes.HasPrefix(b, []byte(head)) {
		return pubAck{}, false
	}
	b = b[len(head):]
	i := bytes.IndexByte(b, '"')
	if i < 1 || !plainName(b[:i]) || !bytes.HasPrefix(b[i:], []byte(seq)) {
		return pubAck{}, false
	}
	b = b[i+len(seq):]
	if len(b) < 2 || b[len(b)-1] != '}' {
		return pubAck{}, false
	}
	n, ok := parseDigits(b[:len(b)-1])
	return pubAck{seq: n}, ok
}

// plainName reports whether a JSON string's bytes need no unescaping:
// no backslash, no control character (a stream's name has neither).
func plainName(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == '\\' {
			return false
		}
	}
	return true
}

// parseDigits reads a decimal uint64 of digits only, without a leading
// zero (but "0"), as JSON and the reply tokens write one.
func parseDigits[T string | []byte](s T) (uint64, bool) {
	if len(s) == 0 || len(s) > 20 || s[0] == '0' && len(s) > 1 {
		return 0, false
	}
	var n uint64
	for i := range len(s) {
		d := uint64(s[i] - '0')
		if d > 9 || n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}
