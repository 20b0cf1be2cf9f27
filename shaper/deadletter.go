package shaper

import (
	"context"
	"log/slog"
	"time"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/outbox"
	"github.com/shaperd/shaper/shaper/outcome"
)

// Pacing of dead letters (the refused ones wait outbox.RetryFirst,
// doubling to outbox.RetryMax).
const (
	dlTimeout  = 10 * time.Second // bounds one DeadLetter call
	dlLogEvery = 10 * time.Second // at most one failure line per this
)

// dlItem is one dead letter waiting to be published.
type dlItem struct {
	l      *lane
	dl     DeadLetter
	failed bool            // a started job that failed for good: book its outcome
	result *outcome.Result // the downstream's answer to the job's last try, for its record
}

// dlWorker publishes dead letters from one goroutine (an outbox.Outbox),
// in order per downstream, so neither the scheduler nor a lane's lock ever
// waits on the publisher. A job is given up (a durable one deleted from
// its stream) only once its dead letter was taken; until then it stays
// queued (a durable job stays taken, kept alive by its queue) and is tried
// again later, the downstream's whole backlog waiting. Its backlog is
// bounded by the jobs the lanes held.
type dlWorker struct {
	s                      *Shaper
	*outbox.Outbox[dlItem]           // the service: Start, and Stop within the grace
	lastLog                time.Time // owned by the outbox's goroutine
}

func newDLWorker(s *Shaper) *dlWorker {
	w := &dlWorker{s: s}
	w.Outbox = outbox.New[dlItem](w, s.graceNow, func() {
		s.log.Error("dead-letter flush exceeded the shutdown grace; cancelling it")
	})
	return w
}

// add queues a dead letter for job. Requires l.mu (reads l.cfg); never blocks.
func (w *dlWorker) add(l *lane, job *queue.Job, reason Reason, why string, failed bool, res *outcome.Result) {
	w.Add(dlItem{l: l, dl: DeadLetter{Subject: l.cfg.DeadLetter, Job: job, Reason: reason, Err: why}, failed: failed, result: res})
}

// Key orders dead letters per downstream (outbox.Handler).
func (w *dlWorker) Key(it dlItem) string { return it.l.name }

// Handle publishes one dead letter (when the lane has a subject and a
// DeadLetterer exists) and reports whether it was taken; if so the job is
// given up and its outcome booked. A refusal is counted and logged, and
// changes nothing else: the job stays queued (outbox.Handler).
func (w *dlWorker) Handle(ctx context.Context, it dlItem) bool {
	sent := false
	var seq uint64
	if it.dl.Subject != "" && w.s.dlr != nil {
		cctx, cancel := context.WithTimeout(ctx, dlTimeout)
		var err error
		seq, err = w.s.dlr.DeadLetter(cctx, it.dl)
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
	var giveUp func()
	if st := it.l.q.Settler; st != nil {
		// After the dead letter and the record: a durable job is deleted
		// only now.
		giveUp = func() { st.GiveUp(it.dl.Job) }
	}
	it.l.note(it.dl.Job, droppedState(it.dl.Reason), time.Now(), told{err: it.dl.Err, result: it.result, seq: seq, settle: giveUp})
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
	waiting := w.Waiting()
	w.log(it).Log(context.Background(), level, "dead letter not stored; the job stays queued and is tried again later",
		"subject", it.dl.Subject, "store_error", err.Error(), "dead_letters_waiting", waiting)
}

// Abandon gives up on a dead letter left when the shutdown grace ran out
// (outbox.Handler): a durable job goes back to its stream untouched (its
// dead letter is tried again after a restart); a memory queue's job is
// lost, logged and counted in shaper_dead_letters_lost_total.
func (w *dlWorker) Abandon(it dlItem) {
	it.l.mu.Lock()
	kept := it.l.q.Settler != nil && it.l.q.Settler.Keep(it.dl.Job)
	if !kept {
		it.l.note(it.dl.Job, droppedState(it.dl.Reason), time.Now(), told{err: it.dl.Err + " (and its dead letter was lost at shutdown)", result: it.result})
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
