package shaper

import (
	"context"
	"log/slog"
	"sync"

	"github.com/shaperd/shaper/queue"
)

// dlItem is one dead letter waiting to be published.
type dlItem struct {
	l      *lane
	dl     DeadLetter
	failed bool // a started job that failed for good: book its outcome
}

// dlWorker publishes dead letters from one goroutine, in order, so neither
// the scheduler nor a lane's lock ever waits on the publisher. Its backlog is
// bounded by the jobs the lanes held.
type dlWorker struct {
	s      *Shaper
	mu     sync.Mutex
	items  []dlItem
	closed bool
	wake   chan struct{} // cap 1
}

func newDLWorker(s *Shaper) *dlWorker {
	return &dlWorker{s: s, wake: make(chan struct{}, 1)}
}

// add queues a dead letter for job. Requires l.mu (reads l.cfg); never blocks.
func (w *dlWorker) add(l *lane, job *queue.Job, reason Reason, why string, failed bool) {
	it := dlItem{l: l, dl: DeadLetter{Subject: l.cfg.DeadLetter, Job: job, Reason: reason, Err: why}, failed: failed}
	w.mu.Lock()
	w.items = append(w.items, it)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// close makes run return once everything queued is published.
func (w *dlWorker) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run publishes until close; ctx bounds each DeadLetter call.
func (w *dlWorker) run(ctx context.Context) {
	for {
		w.mu.Lock()
		batch, closed := w.items, w.closed
		w.items = nil
		w.mu.Unlock()
		for _, it := range batch {
			w.publish(ctx, it)
		}
		if len(batch) > 0 {
			continue
		}
		if closed {
			return
		}
		<-w.wake
	}
}

// publish sends one dead letter (when the lane has a subject and a
// DeadLetterer exists), logs it, and books a failed job's outcome.
func (w *dlWorker) publish(ctx context.Context, it dlItem) {
	log := w.s.log.With("downstream", it.l.name, "job_id", it.dl.Job.ID,
		"reason", string(it.dl.Reason), "error", it.dl.Err)
	sent := false
	if it.dl.Subject != "" && w.s.dlr != nil {
		if err := w.s.dlr.DeadLetter(ctx, it.dl); err != nil {
			log.Error("dead letter not published; job lost", "subject", it.dl.Subject, "publish_error", err.Error())
		} else {
			sent = true
		}
	}
	level := slog.LevelWarn
	if it.dl.Reason == ReasonShutdown {
		level = slog.LevelDebug // Run logs one summary line instead
	}
	log.Log(ctx, level, "job dropped", "dead_lettered", sent)
	it.l.mu.Lock()
	it.l.q.GiveUp(it.dl.Job) // after the dead letter: a durable job is deleted only now
	it.l.mu.Unlock()
	if it.failed {
		o := OutcomeFailed
		if sent {
			o = OutcomeDeadLettered
		}
		it.l.mu.Lock()
		it.l.countOutcome(o)
		it.l.mu.Unlock()
	}
}
