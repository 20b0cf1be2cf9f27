package outcome

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Pacing of the book's writes.
const (
	// maxBatch bounds the changes one round stores together.
	maxBatch = 512
	// retryFirst and retryMax pace the rounds after a store refused one.
	retryFirst = 100 * time.Millisecond
	retryMax   = 5 * time.Second
	// putTimeout bounds one store's Put.
	putTimeout = 10 * time.Second
	// latestKept is how many finished records of a downstream Latest
	// keeps.
	latestKept = 20
	logEvery   = 10 * time.Second
	// startHold is how long the record of a started job of the shared
	// store is held back: a try that ends within it has its final record
	// stored only, one write instead of two.
	startHold = 250 * time.Millisecond
)

// Change is one change of a job's state, to book.
type Change struct {
	Record Record
	// Keep is how long the store keeps the record once the job ended.
	Keep time.Duration
	// Max bounds the Memory store's records of the downstream (Entry.Max).
	Max int
	// Shared: the downstream's records are in the shared store (a durable
	// queue's), else in this process's Memory store.
	Shared bool
	// Events: publish the change as an event.
	Events bool
	// ReplyTo, on a final change, is where the outcome is published.
	ReplyTo string
	// InQueue: the job's queue tells this state by the job's id
	// (queue.Finder) until the job changes again, so the record is not
	// stored; the change is still told (events).
	InQueue bool
	// Done (may be nil) is called once the change was stored and told, or
	// given up at shutdown: the shaper's lanes settle a durable job then
	// (or after a bound), so that its outcome is sent at least once.
	Done func()

	stored bool // kept in the memory store by Note already
}

// Observer is told what the book did, for metrics, from the book's
// goroutine. Any field may be nil.
type Observer struct {
	// Told: an event of state was published for downstream.
	Told func(downstream string, state State)
	// Failed: a round of n changes could not be stored or told.
	Failed func(n int)
}

// Book books the changes of jobs' states from one goroutine: it stores
// each record (Memory, or the shared store), then tells it (events, and a
// final outcome on the producer's reply subject), in the order the
// changes were noted, and runs each change's Done. Note never blocks. It
// is a service (package service): Stop books what is noted within the
// grace, then gives up the rest (their Done still runs).
type Book struct {
	mem    *Memory
	shared Store // nil: a Shared change is kept in mem
	teller Teller
	obs    Observer
	log    *slog.Logger
	grace  func() time.Duration

	mu      sync.Mutex
	pending []Change
	held    map[jobKey]heldStart // started records held back (startHold)
	order   []heldAt             // held starts, oldest first; stale ones stay until due
	latest  map[string]*latest   // the last finished records by downstream
	wake    chan struct{}

	run *bookLife // set by Start

	failing atomic.Bool // the last round of the shared store's changes failed
}

// Failing reports whether the shared store refused the last round that
// had changes of it: changes are kept, and Done runs once they are
// stored.
func (b *Book) Failing() bool { return b.failing.Load() }

// NewBook returns a book over mem (required), shared (nil: none) and
// teller (nil: nothing is told). grace is the shutdown grace.
func NewBook(mem *Memory, shared Store, teller Teller, obs Observer, log *slog.Logger, grace func() time.Duration) *Book {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Book{mem: mem, shared: shared, teller: teller, obs: obs, log: log, grace: grace,
		held: map[jobKey]heldStart{}, latest: map[string]*latest{}, wake: make(chan struct{}, 1)}
}

// jobKey names a job of a downstream.
type jobKey struct{ downstream, id string }

// heldStart is a started change held back: stored when due, unless a
// later change of its job came first.
type heldStart struct {
	c   Change
	due time.Time
}

// heldAt is a held start in the book's order of them.
type heldAt struct {
	k   jobKey
	due time.Time
}

// Note books c; it never blocks. A change kept in the memory store is
// stored at once, on the caller's goroutine (a map write: cheaper than
// handing it over), and handed to the book's goroutine only when there is
// something to tell or a Done to run.
//
// A job's start kept in the shared store is held back startHold (its
// event, if any, is told at once): a try that ends within it replaces the
// start's record before it was written, and the job costs one write. A
// job whose start is held is still found by Get on this instance;
// another instance finds it in its queue (queue.Finder) meanwhile.
func (b *Book) Note(c Change) {
	local := !c.Shared || b.shared == nil
	if local {
		b.mem.putOne(Entry{Record: c.Record, Keep: c.Keep, Max: c.Max})
		c.stored = true
	}
	hold := !local && !c.InQueue && c.Record.State == Started && c.Done == nil
	k := jobKey{c.Record.Downstream, c.Record.JobID}
	b.mu.Lock()
	if !local && len(b.held) > 0 {
		delete(b.held, k) // this change replaces the held start
	}
	if hold {
		due := time.Now().Add(startHold)
		h := c
		h.Events = false // told now, below
		b.held[k] = heldStart{c: h, due: due}
		b.order = append(b.order, heldAt{k: k, due: due})
		c.InQueue = true // not stored, unless it is due
	}
	queue := (!local && !c.InQueue) || c.Events || c.Done != nil || (c.ReplyTo != "" && c.Record.State.Final())
	if queue {
		b.pending = append(b.pending, c)
	}
	if c.Record.State.Final() {
		r := b.latest[c.Record.Downstream]
		if r == nil {
			r = &latest{}
			b.latest[c.Record.Downstream] = r
		}
		r.add(c.Record)
	}
	b.mu.Unlock()
	if !queue && !hold {
		return
	}
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// release moves the held starts due at now to the pending changes, to be
// stored, and returns when the next one is due (zero: none held).
func (b *Book) release(now time.Time) (next time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := 0
	for ; i < len(b.order); i++ {
		o := b.order[i]
		if o.due.After(now) {
			next = o.due
			break
		}
		if h, ok := b.held[o.k]; ok && h.due.Equal(o.due) {
			delete(b.held, o.k)
			b.pending = append(b.pending, h.c)
		}
	}
	b.order = b.order[i:]
	if len(b.order) == 0 {
		b.order = nil // let the backing array go
	}
	return next
}

// Latest returns downstream's last finished records booked by this
// process, newest first.
func (b *Book) Latest(downstream string) []Record {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.latest[downstream]
	if r == nil {
		return []Record{}
	}
	out := make([]Record, 0, r.n)
	for i := 1; i <= r.n; i++ { // newest first
		out = append(out, r.recs[(r.next-i+latestKept)%latestKept])
	}
	return out
}

// latest is a ring of a downstream's last latestKept finished records.
type latest struct {
	recs [latestKept]Record
	next int // where the next goes
	n    int // how many it holds
}

func (r *latest) add(rec Record) {
	r.recs[r.next] = rec
	r.next = (r.next + 1) % latestKept
	r.n = min(r.n+1, latestKept)
}

// Get returns job id's record of downstream: its latest change noted and
// not yet stored, else the record in the store its records are in
// (shared: the shared store), so that a job is found from the moment its
// acceptance is answered.
func (b *Book) Get(ctx context.Context, downstream, id string, shared bool) (Record, bool, error) {
	b.mu.Lock()
	for i := len(b.pending) - 1; i >= 0; i-- {
		if r := &b.pending[i].Record; r.JobID == id && r.Downstream == downstream {
			rec := *r
			b.mu.Unlock()
			return rec, true, nil
		}
	}
	if h, ok := b.held[jobKey{downstream, id}]; ok {
		b.mu.Unlock()
		return h.c.Record, true, nil
	}
	b.mu.Unlock()
	if shared && b.shared != nil {
		return b.shared.Get(ctx, downstream, id)
	}
	return b.mem.Get(ctx, downstream, id)
}

// Waiting is the number of changes noted and not yet booked.
func (b *Book) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}
