package shaper

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/shaperd/shaper/queue"
)

// Pacing of dead letters the DeadLetterer refused.
const (
	dlRetryFirst = time.Second      // wait after a downstream's first failed try
	dlRetryMax   = 30 * time.Second // the doubling stops here
	dlTimeout    = 10 * time.Second // bounds one DeadLetter call
	dlLogEvery   = 10 * time.Second // at most one failure line per this
)

// dlItem is one dead letter waiting to be published.
type dlItem struct {
	l      *lane
	dl     DeadLetter
	failed bool // a started job that failed for good: book its outcome
}

// dlBacklog is one downstream's dead letters waiting to be published, in
// order. After a failed try the whole backlog waits (the store is likely
// down for all of them), doubling from dlRetryFirst to dlRetryMax.
type dlBacklog struct {
	items []dlItem
	fails int       // consecutive failed tries
	next  time.Time // no try before
}

// dlWorker publishes dead letters from one goroutine, in order per
// downstream, so neither the scheduler nor a lane's lock ever waits on the
// publisher. A job is given up (a durable one deleted from its stream) only
// once its dead letter was taken; until then it stays queued (a durable
// job stays taken, kept alive by its queue) and is tried again later. Its
// backlog is bounded by the jobs the lanes held.
type dlWorker struct {
	s      *Shaper
	mu     sync.Mutex
	items  []dlItem // added, not yet in a backlog
	closed bool
	wake   chan struct{} // cap 1

	// Owned by run.
	backlogs map[string]*dlBacklog // by downstream
	order    []string              // downstreams with a backlog, first come first
	lastLog  time.Time
}

func newDLWorker(s *Shaper) *dlWorker {
	return &dlWorker{s: s, wake: make(chan struct{}, 1), backlogs: map[string]*dlBacklog{}}
}

// add queues a dead letter for job. Requires l.mu (reads l.cfg); never blocks.
func (w *dlWorker) add(l *lane, job *queue.Job, reason Reason, why string, failed bool) {
	it := dlItem{l: l, dl: DeadLetter{Subject: l.cfg.DeadLetter, Job: job, Reason: reason, Err: why}, failed: failed}
	w.mu.Lock()
	w.items = append(w.items, it)
	w.mu.Unlock()
	w.signal()
}

func (w *dlWorker) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// close makes run return once everything queued is published, or once
// ctx is cancelled (the shutdown grace ran out).
func (w *dlWorker) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.signal()
}

// run publishes until close and an empty backlog; ctx bounds each
// DeadLetter call. When ctx is cancelled, what is left is abandon'ed.
func (w *dlWorker) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		closed := w.collect()
		next, pending := w.flush(ctx)
		if ctx.Err() != nil {
			w.abandon()
			pending = false
		}
		if closed && !pending {
			return
		}
		done := ctx.Done()
		if ctx.Err() != nil {
			done = nil // abandoned; wait for close or more
		}
		var fire <-chan time.Time
		if pending {
			timer.Reset(max(time.Until(next), 0))
			fire = timer.C
		}
		select {
		case <-w.wake:
		case <-done:
		case <-fire:
		}
		timer.Stop()
	}
}

// collect moves added dead letters into their downstreams' backlogs and
// reports whether close was called.
func (w *dlWorker) collect() bool {
	w.mu.Lock()
	items, closed := w.items, w.closed
	w.items = nil
	w.mu.Unlock()
	for _, it := range items {
		b := w.backlogs[it.l.name]
		if b == nil {
			b = &dlBacklog{}
			w.backlogs[it.l.name] = b
			w.order = append(w.order, it.l.name)
		}
		b.items = append(b.items, it)
	}
	return closed
}

// flush tries every backlog whose time has come, in order, stopping a
// backlog at its first failure. It returns the earliest next try and
// whether anything is left.
func (w *dlWorker) flush(ctx context.Context) (next time.Time, pending bool) {
	order := w.order[:0]
	for _, name := range w.order {
		b := w.backlogs[name]
		if !b.next.After(time.Now()) {
			for len(b.items) > 0 && ctx.Err() == nil {
				if !w.publish(ctx, b.items[0]) {
					b.fails++
					b.next = time.Now().Add(dlBackoff(b.fails))
					break
				}
				b.items, b.fails = b.items[1:], 0
			}
		}
		if len(b.items) == 0 {
			delete(w.backlogs, name)
			continue
		}
		order = append(order, name)
		if !pending || b.next.Before(next) {
			next, pending = b.next, true
		}
	}
	w.order = order
	return next, pending
}

// dlBackoff is the wait after the given number of consecutive failures.
func dlBackoff(fails int) time.Duration {
	d := dlRetryFirst
	for i := 1; i < fails && d < dlRetryMax; i++ {
		d *= 2
	}
	return min(d, dlRetryMax)
}

// publish sends one dead letter (when the lane has a subject and a
// DeadLetterer exists) and reports whether it was taken; if so the job is
// given up and its outcome booked. A refusal is counted and logged, and
// changes nothing else: the job stays queued.
func (w *dlWorker) publish(ctx context.Context, it dlItem) bool {
	sent := false
	if it.dl.Subject != "" && w.s.dlr != nil {
		cctx, cancel := context.WithTimeout(ctx, dlTimeout)
		err := w.s.dlr.DeadLetter(cctx, it.dl)
		cancel()
		if err != nil {
			it.l.m.DLStoreErrors.Inc()
			w.logFailure(it, err)
			return false
		}
		sent = true
	}
	level := slog.LevelWarn
	if it.dl.Reason == ReasonShutdown {
		level = slog.LevelDebug // Run logs one summary line instead
	}
	w.log(it).Log(ctx, level, "job dropped", "dead_lettered", sent)
	it.l.mu.Lock()
	defer it.l.mu.Unlock()
	if it.l.q.Settler != nil {
		it.l.q.Settler.GiveUp(it.dl.Job) // after the dead letter: a durable job is deleted only now
	}
	if it.failed {
		o := OutcomeFailed
		if sent {
			o = OutcomeDeadLettered
		}
		it.l.countOutcome(o)
	}
	return true
}

func (w *dlWorker) log(it dlItem) *slog.Logger {
	return w.s.log.With("downstream", it.l.name, "job_id", it.dl.Job.ID,
		"reason", string(it.dl.Reason), "error", it.dl.Err)
}

// logFailure logs a refused dead letter, at most once per dlLogEvery at
// error level (a store outage refuses every one).
func (w *dlWorker) logFailure(it dlItem, err error) {
	level := slog.LevelDebug
	if now := time.Now(); now.Sub(w.lastLog) >= dlLogEvery {
		w.lastLog, level = now, slog.LevelError
	}
	waiting := 0
	for _, b := range w.backlogs {
		waiting += len(b.items)
	}
	w.log(it).Log(context.Background(), level, "dead letter not stored; the job stays queued and is tried again later",
		"subject", it.dl.Subject, "store_error", err.Error(), "dead_letters_waiting", waiting)
}

// abandon gives up on every dead letter left when the shutdown grace ran
// out: a durable job goes back to its stream untouched (its dead letter is
// tried again after a restart); a memory queue's job is lost, logged and
// counted in shaper_dead_letters_lost_total.
func (w *dlWorker) abandon() {
	for _, name := range w.order {
		for _, it := range w.backlogs[name].items {
			it.l.mu.Lock()
			kept := it.l.q.Settler != nil && it.l.q.Settler.Keep(it.dl.Job)
			if !kept {
				it.l.m.DLLost.Inc()
				if it.failed {
					it.l.countOutcome(OutcomeFailed)
				}
			}
			it.l.mu.Unlock()
			if kept {
				w.log(it).Warn("dead letter not stored within the shutdown grace; the job stays in its stream")
			} else {
				w.log(it).Error("dead letter not stored within the shutdown grace; job lost", "subject", it.dl.Subject)
			}
		}
		delete(w.backlogs, name)
	}
	w.order = w.order[:0]
}
