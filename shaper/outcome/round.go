package outcome

import (
	"context"
	"sync"
	"time"

	"github.com/shaperd/shaper/shaper/service"
)

// bookLife is the book's goroutine: started by Start, asked to finish by
// Stop.
type bookLife struct {
	once   sync.Once
	stop   chan struct{}
	done   chan struct{}
	cancel context.CancelFunc
}

// Start starts the book's goroutine (service.Service); ctx bounds the
// start only.
func (b *Book) Start(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.run != nil {
		return service.ErrStarted
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.run = &bookLife{stop: make(chan struct{}), done: make(chan struct{}), cancel: cancel}
	go b.loop(ctx, b.run)
	return nil
}

// Stop books what is noted within the shutdown grace, then gives up the
// rest, and returns once the goroutine ended (service.Service).
// Idempotent.
func (b *Book) Stop() error {
	b.mu.Lock()
	r := b.run
	b.mu.Unlock()
	if r == nil {
		return nil
	}
	r.once.Do(func() { close(r.stop) })
	grace := time.Duration(0)
	if b.grace != nil {
		grace = b.grace()
	}
	service.WaitGrace(r.done, grace, func() {
		b.log.Error("job records not stored within the shutdown grace; giving them up", "waiting", b.Waiting())
		r.cancel()
	})
	return nil
}

// loop books rounds until stopped; then it books what is left until ctx
// is cancelled, and gives up the rest.
func (b *Book) loop(ctx context.Context, r *bookLife) {
	defer close(r.done)
	defer r.cancel()
	wait := time.Duration(0)
	var lastLog time.Time
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		next := b.release(time.Now())
		var due <-chan time.Time
		wake := b.wake
		switch {
		case wait > 0: // after a refused round: only the retry wakes it
			t.Reset(wait)
			due, wake = t.C, nil
		case !next.IsZero(): // a held start is due
			t.Reset(time.Until(next))
			due = t.C
		}
		stopping := false
		select {
		case <-due:
		case <-wake:
		case <-r.stop:
			stopping = true
		}
		if stopping {
			b.flush(ctx)
			return
		}
		b.release(time.Now())
		for {
			err := b.round(ctx)
			if err == nil {
				wait = 0
				if b.Waiting() > 0 {
					continue
				}
				break
			}
			wait = min(max(2*wait, retryFirst), retryMax)
			if now := time.Now(); now.Sub(lastLog) >= logEvery {
				lastLog = now
				b.log.Error("job records not stored; trying again", "error", err.Error(), "waiting", b.Waiting(), "retry_in", wait)
			}
			break
		}
	}
}

// flush books rounds until none is left or ctx ends, then gives up what
// is left. The starts still held are not stored: their jobs did not end,
// and stay queued (queue.Finder tells them).
func (b *Book) flush(ctx context.Context) {
	for b.Waiting() > 0 && ctx.Err() == nil {
		if err := b.round(ctx); err != nil && ctx.Err() == nil {
			t := time.NewTimer(retryFirst)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
	}
	b.mu.Lock()
	left := b.pending
	b.pending = nil
	b.mu.Unlock()
	for _, c := range left {
		if c.Done != nil {
			c.Done()
		}
	}
}

// round books the oldest pending changes, at most maxBatch: it stores
// them, tells them, runs their Done and takes them off. When the shared
// store fails, the changes of its downstreams stay pending, in order, at
// the front, and the others are booked: an outage of the shared store
// holds up no memory queue's records.
func (b *Book) round(ctx context.Context) error {
	b.mu.Lock()
	n := min(len(b.pending), maxBatch)
	batch := b.pending[:n:n]
	b.mu.Unlock()
	if n == 0 {
		return nil
	}
	mem, shared := entries(batch, b.shared != nil)
	var err error
	if len(shared) > 0 {
		pctx, cancel := context.WithTimeout(ctx, putTimeout)
		err = b.shared.Put(pctx, shared)
		cancel()
		b.failing.Store(err != nil)
	}
	if len(mem) > 0 {
		_ = b.mem.Put(ctx, mem) // never fails
	}
	var booked, kept []Change
	if err == nil {
		booked = batch
	} else {
		booked, kept = b.split(batch)
		if b.obs.Failed != nil {
			b.obs.Failed(len(kept))
		}
	}
	for i := range booked {
		b.tell(&booked[i])
	}
	b.mu.Lock()
	b.pending = append(kept, b.pending[n:]...)
	if len(b.pending) == 0 {
		b.pending = nil // let the backing array go
	}
	b.mu.Unlock()
	for _, c := range booked {
		if c.Done != nil {
			c.Done()
		}
	}
	return err
}

// split parts batch into the changes kept in the memory store and those
// of the shared one, each in its order.
func (b *Book) split(batch []Change) (mem, shared []Change) {
	for _, c := range batch {
		if c.Shared && b.shared != nil {
			shared = append(shared, c)
		} else {
			mem = append(mem, c)
		}
	}
	return mem, shared
}

// entries are the records batch stores, in the memory store and in the
// shared one (when there is one): the last of each job only, as each
// replaces the ones before it, so a job that changed several times while
// the book was behind costs one write.
func entries(batch []Change, hasShared bool) (mem, shared []Entry) {
	type job struct{ downstream, id string }
	last := make(map[job]int, len(batch))
	for i, c := range batch {
		last[job{c.Record.Downstream, c.Record.JobID}] = i
	}
	for i, c := range batch {
		if c.stored || c.InQueue || last[job{c.Record.Downstream, c.Record.JobID}] != i {
			continue
		}
		e := Entry{Record: c.Record, Keep: c.Keep, Max: c.Max}
		if c.Shared && hasShared {
			shared = append(shared, e)
		} else {
			mem = append(mem, e)
		}
	}
	return mem, shared
}

// tell publishes c's event and, on a final change with a reply subject,
// its outcome. A failed publish is logged: the record is stored, and a
// producer waiting for the outcome falls back to looking it up.
func (b *Book) tell(c *Change) {
	if b.teller == nil {
		return
	}
	rec := &c.Record
	if c.Events {
		if err := b.teller.Event(rec); err != nil {
			b.log.Warn("job event not published", "downstream", rec.Downstream, "job_id", rec.JobID, "state", string(rec.State), "error", err.Error())
		} else if b.obs.Told != nil {
			b.obs.Told(rec.Downstream, rec.State)
		}
	}
	if c.ReplyTo != "" && rec.State.Final() {
		if err := b.teller.Outcome(c.ReplyTo, rec); err != nil {
			b.log.Warn("job outcome not published", "downstream", rec.Downstream, "job_id", rec.JobID, "state", string(rec.State), "error", err.Error())
		}
	}
}
