package deadletter

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/producer"
)

// Headers of the job protocol a replay reads from a dead letter.
const (
	hdrJobID = producer.HeaderJobID
	hdrCost  = producer.HeaderCost
)

// Waits of a replayer.
const (
	minRefusedWait = 100 * time.Millisecond // shortest wait after a refusal (queue_full, unavailable)
	maxRefusedWait = time.Second            // longest
	storeRetry     = time.Second            // after a store error
	deleteWithin   = 5 * time.Second        // bound of deleting a replayed dead letter, even when stopped
)

// replay is one replayer's state: a plan and how it gets there.
type replay struct {
	log      *slog.Logger
	deps     *ReplayDeps
	plan     replayPlan
	replayed prometheus.Counter
}

// offerResult is how the lane answered a replayed job.
type offerResult int

const (
	offerAccepted offerResult = iota // queued (a durable queue: stored)
	offerSkip                        // can never be accepted: left in the store, passed over
	offerGone                        // the downstream is gone: the replay ends
	offerStopped                     // ctx ended while waiting
)

// run replays the plan's dead letters oldest first, at most plan.Rate a
// second, each deleted from the store once its lane accepted it, saving
// the plan after each. It returns when the plan is done (its plan is then
// deleted), when the plan was taken over, or when ctx ends (the plan stays
// stored for the next start).
func (r *replay) run(ctx context.Context) {
	every := time.Duration(float64(time.Second) / r.plan.Rate)
	next := time.Now()
	for r.plan.Remaining > 0 {
		if !sleepCtx(ctx, time.Until(next)) {
			return
		}
		dl, ok := r.nextEntry(ctx)
		if ctx.Err() != nil {
			return
		}
		if !ok {
			break // nothing left up to plan.Through
		}
		at, res := r.offer(ctx, dl)
		switch res {
		case offerStopped:
			return
		case offerGone:
			r.log.Warn("dead-letter replay ended: the downstream was removed", "remaining", r.plan.Remaining)
			r.finish(ctx)
			return
		case offerSkip:
			r.plan.After = dl.Seq
			continue
		}
		if !r.replayed1(ctx, dl.Seq) {
			return
		}
		next = at.Add(every)
	}
	r.log.Info("dead-letter replay done", "not_replayed", r.plan.Remaining)
	r.finish(ctx)
}

// replayed1 books a dead letter its lane accepted: it is deleted from the
// store and counted, and the plan is saved, even when ctx ended meanwhile
// (a stopped replay must neither leave a replayed job stored nor resume
// from before it). It reports false when the plan was taken over.
func (r *replay) replayed1(ctx context.Context, seq uint64) bool {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteWithin)
	defer cancel()
	err := r.deps.Store.Delete(dctx, r.plan.Downstream, seq)
	if err != nil && !errors.Is(err, ErrNotFound) {
		r.log.Error("replayed dead letter not deleted from the store; it may be replayed again", "seq", seq, "error", err.Error())
	}
	r.replayed.Inc()
	r.plan.Remaining--
	r.plan.After = seq
	switch err := r.deps.Plans.save(dctx, &r.plan); {
	case errors.Is(err, errTakenOver):
		r.log.Info("dead-letter replay handed over: its plan was replaced")
		return false
	case err != nil:
		r.log.Warn("dead-letter replay progress not saved; a restart resumes from the last saved point", "error", err.Error())
	}
	return true
}

// finish deletes the plan.
func (r *replay) finish(ctx context.Context) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteWithin)
	defer cancel()
	if err := r.deps.Plans.remove(dctx, r.plan); err != nil {
		r.log.Warn("finished dead-letter replay's plan not deleted; the next start finds nothing to replay", "error", err.Error())
	}
}

// nextEntry returns the oldest dead letter after plan.After that matches
// the plan, with its payload; false when there is none up to
// plan.Through. A store error is logged and retried until ctx ends.
func (r *replay) nextEntry(ctx context.Context) (Stored, bool) {
	for ctx.Err() == nil {
		list, _, err := r.deps.Store.List(ctx, r.plan.Downstream,
			Filter{Reason: r.plan.Reason, Limit: 1, After: r.plan.After})
		if err == nil && (len(list) == 0 || list[0].Seq > r.plan.Through) {
			return Stored{}, false
		}
		var dl Stored
		if err == nil {
			dl, err = r.deps.Store.Get(ctx, r.plan.Downstream, list[0].Seq)
			if errors.Is(err, ErrNotFound) {
				r.plan.After = list[0].Seq // deleted meanwhile
				continue
			}
		}
		if err == nil {
			return dl, true
		}
		if ctx.Err() == nil {
			r.log.Warn("dead-letter store not answering; replay retries", "error", err.Error(), "in", storeRetry)
			sleepCtx(ctx, storeRetry)
		}
	}
	return Stored{}, false
}

// offer hands dl's job to its lane once the lane can take it (the
// shaper's Replay waits on the lane's readiness: no live job waiting, its
// next slot due) until the lane accepts it: a full lane, a store failure
// or a job that would expire is waited out and the same job offered again.
// It returns when it was accepted.
func (r *replay) offer(ctx context.Context, dl Stored) (time.Time, offerResult) {
	job := replayJob(r.plan.Downstream, dl, r.deps.KeyHeader)
	for {
		ch := make(chan shaper.Receipt, 1)
		if r.deps.Target.Replay(ctx, job, func(rc shaper.Receipt) { ch <- rc }) != nil {
			return time.Time{}, offerStopped
		}
		rc := <-ch // a durable store answers within its own timeout
		switch {
		case rc.Accepted:
			return time.Now(), offerAccepted
		case rc.Reason == shaper.ReasonUnknownDownstream:
			return time.Time{}, offerGone
		case rc.Reason == shaper.ReasonBadRequest:
			r.log.Warn("dead letter cannot be replayed; it stays stored", "seq", dl.Seq, "job_id", job.ID, "error", errText(rc.Err))
			return time.Time{}, offerSkip
		}
		// queue_full, unavailable, would_expire: wait and offer it again
		wait := min(max(rc.RetryAfter, minRefusedWait), maxRefusedWait)
		if rc.RetryAfter == 0 {
			wait = maxRefusedWait
		}
		if !sleepCtx(ctx, wait) {
			return time.Time{}, offerStopped
		}
	}
}

// replayJob rebuilds the job a dead letter carries: its original id (so
// the downstream sees the same Idempotency-Key), payload and producer
// headers; its key from the key header and its cost from Shaper-Cost if
// the dead letter has them. Its DedupeID is the dead letter's seq, so a
// durable queue refuses the same dead letter twice within its duplicate
// window (a replay resumed after a crash between store and delete).
func replayJob(downstream string, dl Stored, keyHeader string) *queue.Job {
	h := http.Header(dl.Header)
	job := &queue.Job{
		ID:         h.Get(hdrJobID),
		Downstream: downstream,
		Key:        h.Get(keyHeader),
		Payload:    dl.Data,
		Header:     ProducerHeaders(h, keyHeader),
		DedupeID:   "shaper-replay-" + strconv.FormatUint(dl.Seq, 10),
	}
	if c, err := strconv.Atoi(h.Get(hdrCost)); err == nil && c > 0 {
		job.Cost = c
	}
	return job
}

// ProducerHeaders are a dead letter's headers less the job protocol's
// (Shaper-*, Nats-*) and the key header: what the producer sent on.
func ProducerHeaders(h http.Header, keyHeader string) http.Header {
	var out http.Header
	for name, vals := range h {
		lower := strings.ToLower(name)
		if strings.HasPrefix(lower, "shaper-") || strings.HasPrefix(lower, "nats-") || strings.EqualFold(name, keyHeader) {
			continue
		}
		if out == nil {
			out = http.Header{}
		}
		out[name] = vals
	}
	return out
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
