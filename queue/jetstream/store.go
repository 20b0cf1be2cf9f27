package jetstream

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/queue"
)

// Defaults for zero fields of Settings.
const (
	DefaultStreamPrefix  = "SHAPER"
	DefaultSubjectPrefix = "shaper.queue"
	DefaultAckWait       = 5 * time.Second // see Settings.AckWait
	DefaultPinnedTTL     = 5 * time.Second
	DefaultMaxPending    = 4096
	DefaultDedupeWindow  = 2 * time.Minute
	// RequestTimeout bounds one JetStream API request of the stream and
	// consumer checks: on a healthy server they take milliseconds; one lost
	// while a cluster elects a leader is given up after this and tried
	// again, so it does not hold start-up or the queue's readiness for
	// the whole of a longer deadline.
	RequestTimeout = time.Second
	// Group is the consumer's priority group; Consumer its durable name.
	Group    = "shaperd"
	Consumer = "shaperd"
)

// Settings configure the JetStream backend; zero fields take the defaults.
type Settings struct {
	StreamPrefix  string        // stream of downstream D: <StreamPrefix>_D
	SubjectPrefix string        // its subject: <SubjectPrefix>.D
	Replicas      int           // stream replicas; 0 = 1
	Storage       string        // "file" (default) or "memory"
	MaxMsgSize    int32         // largest stored message (payload + headers); 0 = server limit
	DedupeWindow  time.Duration // duplicate window for Nats-Msg-Id
	AckWait       time.Duration // a dead or frozen instance's jobs go to the next drainer after this (see Queue)
	PinnedTTL     time.Duration // failover: a pinned instance silent this long is replaced
	MaxPending    int           // stores awaiting their PubAck at most (see publisher)
	Logger        *slog.Logger  // nil = discard
}

func (s Settings) withDefaults() Settings {
	if s.StreamPrefix == "" {
		s.StreamPrefix = DefaultStreamPrefix
	}
	if s.SubjectPrefix == "" {
		s.SubjectPrefix = DefaultSubjectPrefix
	}
	s.Replicas = max(s.Replicas, 1)
	if s.Storage == "" {
		s.Storage = "file"
	}
	if s.DedupeWindow <= 0 {
		s.DedupeWindow = DefaultDedupeWindow
	}
	if s.AckWait <= 0 {
		s.AckWait = DefaultAckWait
	}
	if s.PinnedTTL <= 0 {
		s.PinnedTTL = DefaultPinnedTTL
	}
	if s.MaxPending <= 0 {
		s.MaxPending = DefaultMaxPending
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	return s
}

// Store is the JetStream backend of one daemon: it builds a Queue per
// durable downstream and owns the async publisher they share. Safe for
// concurrent use.
type Store struct {
	nc  *nats.Conn
	js  natsjs.JetStream
	set Settings
	log *slog.Logger

	// inFlight bounds the jobs with a Nats-Msg-Id between their Offer and
	// their answer (lookup, store) to MaxPending.
	inFlight chan struct{}

	pub *publisher // the intake's stores, answered from their PubAcks

	mu      sync.Mutex
	records natsjs.Stream // the dedupe records' stream, once ensured
	window  natsjs.Stream // the windows' stream, once ensured

	ledger ledgerStore // the hand-backs' bucket, once found or created

	epochs sync.Map // downstream → its stream's epoch (name.go), once ensured
	places sync.Map // downstream → *natsjs.Placement of its stream (QueueSettings.Placement)

	watchMu  sync.Mutex    // serialises startRecords and Stop
	watching bool          // the records stream's watch feeds table
	stopped  bool          // Stop was called: no watch starts
	stop     chan struct{} // closed by Stop: the watch ends
	watchWG  sync.WaitGroup
	table    *recordTable // the records of the window, in memory
}

type pendingPub struct {
	q       *Queue
	job     *queue.Job
	subject string // the job's subject
	done    func(int, error)
	epoch   string // the job is named by its place in a stream of this epoch; "" = it has an ID
	// reply, when set, takes the PubAck instead (an atomic batch's commit,
	// a probe of a Nats-Msg-Id): on the publisher's goroutine, so it must
	// not block.
	reply func(pubAck, error)
}

// New prepares the backend on nc. It does no I/O.
func New(nc *nats.Conn, s Settings) (*Store, error) {
	st := &Store{nc: nc, set: s.withDefaults(), stop: make(chan struct{})}
	st.log = st.set.Logger
	st.inFlight = make(chan struct{}, st.set.MaxPending)
	st.table = newRecordTable(st.set.DedupeWindow, MaxRecords)
	st.pub = newPublisher(nc, st.set.MaxPending, st.answer)
	js, err := natsjs.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	st.js = js
	return st, nil
}

// StreamName returns the stream that holds downstream's queue.
func (st *Store) StreamName(downstream string) string {
	return st.set.StreamPrefix + "_" + downstream
}

// Subject returns the subject downstream's jobs are stored under.
func (st *Store) Subject(downstream string) string {
	return st.set.SubjectPrefix + "." + downstream
}

// Ensure creates or checks the stream and consumer of every queue in
// queues, and the dedupe records' stream, whose records of the window it
// loads into memory (it returns once they are, or with ErrRecordsLoading
// when ctx ends first), returning every problem at once. It is what
// start-up calls while NATS is reachable, so that an incompatible stream
// stops the daemon.
func (st *Store) Ensure(ctx context.Context, queues []QueueSettings) error {
	var errs []error
	if err := st.startRecords(ctx); err != nil {
		errs = append(errs, err)
	} else if err := st.waitRecords(ctx); err != nil {
		errs = append(errs, err)
	}
	if len(queues) > 0 {
		if _, _, err := st.handbacks(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for _, qs := range queues {
		st.place(qs)
		if _, _, err := st.ensure(ctx, qs.Name, qs.bounds()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// publish stores job for q, in the order of the calls for q; done gets
// the answer. A job with a Nats-Msg-Id is first looked up in the dedupe
// records (a copy of a job accepted within the window that has left the
// stream is answered queue.ErrDuplicate with the original's id): in
// memory, or, while the table cannot answer a miss (see recordTable.get),
// in the records stream, off the caller's goroutine. It blocks while
// MaxPending jobs are being looked up in the stream or stored after one.
func (st *Store) publish(q *Queue, job *queue.Job, done func(int, error)) {
	if job.DedupeID != "" {
		jobID, found, sure := st.table.get(time.Now(), job.DedupeID)
		switch {
		case found:
			job.ID = jobID
			done(0, queue.ErrDuplicate)
			return
		case !sure:
			st.inFlight <- struct{}{}
			release := func(pos int, err error) {
				<-st.inFlight
				done(pos, err)
			}
			turn := q.order.add(nil)
			go st.lookUpThenSend(q, job, release, turn)
			return
		}
	}
	if !q.order.idle() { // behind a job being looked up
		q.order.add(func() { st.send(q, job, done) })
		return
	}
	st.send(q, job, done)
}

// send stores job for q; done gets the PubAck's answer.
// A job without an ID is named by its place once stored (name.go), or
// given a unique id before its stream's epoch is known.
func (st *Store) send(q *Queue, job *queue.Job, done func(int, error)) {
	epoch := ""
	if job.ID == "" {
		if epoch = q.epochNow(); epoch == "" {
			job.ID = rand.Text() // unique, as a name would be
		}
	}
	m := encode(q.subjectFor(job, time.Now()), job)
	if err := st.pub.publish(m, pendingPub{q: q, job: job, subject: m.Subject, done: done, epoch: epoch}); err != nil {
		done(0, fmt.Errorf("publish to %s: %w", m.Subject, err))
	}
}

// answer books a store's PubAck and answers its job. It runs on the
// publisher's reply goroutine (or a timer's): it must not block.
func (st *Store) answer(p pendingPub, pa pubAck, err error) {
	switch {
	case p.reply != nil:
		p.reply(pa, err)
	case err != nil:
		p.done(0, p.q.refused(err))
	case pa.duplicate:
		go st.duplicate(p, pa.seq) // looks the original up: I/O
	default:
		if p.epoch != "" {
			p.job.ID, p.job.Named = nameOf(p.epoch, pa.seq), true
		}
		p.done(p.q.stored(pa.seq, p.job, p.subject), nil)
	}
}

// Refusals of a publish, told apart by the JetStream API's answer.
const (
	errCodeAccountResources = 10002 // the account's storage limit is reached
	errCodeNoResources      = 10023 // the server's storage limit is reached
	errCodeStorageResources = 10047 // the server cannot reserve the storage
)

// refused maps the store's refusal of a publish to q's error: a key's
// subject at its max_msgs_per_subject (queue.key_capacity under fairness)
// is queue.ErrKeyFull; the stream at its max_msgs is queue.ErrFull; at its max_bytes, queue.ErrMaxBytes
// when that bound is queue.max_bytes, queue.ErrNoSpace when it is the
// queue's share of a bounded store; the server or account out of storage
// is queue.ErrNoSpace. The server's own words are kept in the chain for
// logs but the caller answers producers from the sentinel alone.
func (q *Queue) refused(err error) error {
	var apiErr *natsjs.APIError
	if !errors.As(err, &apiErr) {
		return fmt.Errorf("store in stream %s: %w", q.stream, err)
	}
	q.mu.Lock()
	explicit := q.bounds.maxBytes > 0 && q.bounds.explicit
	q.mu.Unlock()
	switch {
	case strings.Contains(apiErr.Description, "maximum messages per subject"):
		return fmt.Errorf("%w: stream %s: %v", queue.ErrKeyFull, q.stream, err)
	case strings.Contains(apiErr.Description, "maximum messages"):
		return fmt.Errorf("%w: stream %s: %v", queue.ErrFull, q.stream, err)
	case strings.Contains(apiErr.Description, "maximum bytes") && explicit:
		return fmt.Errorf("%w: stream %s: %v", queue.ErrMaxBytes, q.stream, err)
	case strings.Contains(apiErr.Description, "maximum bytes"),
		apiErr.ErrorCode == errCodeNoResources, apiErr.ErrorCode == errCodeAccountResources,
		apiErr.ErrorCode == errCodeStorageResources:
		return fmt.Errorf("%w: stream %s: %v", queue.ErrNoSpace, q.stream, err)
	}
	return fmt.Errorf("store in stream %s: %w", q.stream, err)
}

// place records where ls's stream lives (its placement, or none).
func (st *Store) place(ls QueueSettings) {
	if p := ls.Placement; p != nil && (p.Cluster != "" || len(p.Tags) > 0) {
		st.places.Store(ls.Name, &natsjs.Placement{Cluster: p.Cluster, Tags: append([]string(nil), p.Tags...)})
		return
	}
	st.places.Delete(ls.Name)
}

// placementOf is downstream's stream's placement (nil: none).
func (st *Store) placementOf(downstream string) *natsjs.Placement {
	if p, ok := st.places.Load(downstream); ok {
		return p.(*natsjs.Placement)
	}
	return nil
}
