package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/deadletter"
	"github.com/shaperd/shaper/shaper/dedupe"
	"github.com/shaperd/shaper/shaper/metrics"
	"github.com/shaperd/shaper/shaper/outcome"
)

// maxWaitingRetry is the Retry-After of a copy refused because
// dedupe.MaxWaiting copies wait already.
const maxWaitingRetry = time.Second

// intake turns intake messages into submissions and answers producers.
// Answers may come from other goroutines than handle's (a durable store's,
// a remote admission decision's), so a message id is claimed in dedupe
// before its job is submitted and settled with the answer.
type intake struct {
	limits   func() intakeLimits
	shaper   *shaper.Shaper
	jobs     *metrics.Metrics
	metrics  *daemonMetrics
	dedupe   *dedupe.Table[shaper.Receipt]
	known    func(downstream string) (deadLetter string, ok bool) // configured downstreams
	dead     *deadletter.Rejected                                 // stores rejected plain publishes' dead letters
	nc       *nats.Conn
	log      *slog.Logger
	lastWarn atomic.Int64 // unix nanoseconds of logCause's last warning
	tracer   trace.Tracer // nil: tracing off (receive spans: tracing.go)
}

func (in *intake) handle(msg *nats.Msg) {
	now := time.Now()
	hdr := http.Header(msg.Header)
	var span trace.Span // nil: tracing off
	if in.tracer != nil {
		span = in.receive(msg, hdr, now)
	}
	job, msgID, rej := parseJob(now, in.limits(), msg.Subject, hdr, msg.Data)
	if rej != nil {
		in.reject(msg, job, rej)
		endReceive(span, "rejected", rej.reason, "")
		return
	}
	if msgID != "" && !in.claim(now, msg, job, msgID) {
		endReceive(span, "duplicate", "", "")
		return
	}
	job.DedupeID = msgID // the shaper gives the job its id
	// A durable lane answers from its store's acknowledgement, on another
	// goroutine: handle does not wait, so intake never serialises on the
	// store's round trip.
	in.shaper.SubmitFunc(job, func(rc shaper.Receipt) {
		in.answer(msg, job, msgID, now, rc)
		if span != nil {
			endReceipt(span, rc)
		}
	})
}

// answer replies to one submission. It may run concurrently with handle
// (durable lanes), so it builds its reply in a pooled buffer.
func (in *intake) answer(msg *nats.Msg, job *queue.Job, msgID string, now time.Time, rc shaper.Receipt) {
	// Settle before anything else, rejections included: an unsettled id
	// stays claimed, and every later copy of it (a producer's retry) would
	// wait for an answer that never comes.
	if msgID != "" {
		in.dedupe.Settle(now, msgID, rc)
	}
	if !rc.Accepted {
		in.answerRejected(msg, job, rc.Reason, rc.RetryAfter, rc.Err)
		return
	}
	if rc.Duplicate {
		in.metrics.duplicates.Inc()
	}
	if msg.Reply == "" {
		return
	}
	buf := replyPool.Get().(*replyBuf)
	state := ""
	if rc.Duplicate {
		state = in.stateOf(rc.Downstream, rc.JobID)
	}
	in.respond(msg, buf.accepted(msg.Reply, rc, rc.Duplicate, state))
	replyPool.Put(buf) // PublishMsg copied the message
}

// claim claims msgID for job in dedupe, and reports whether job goes on
// into the shaper: a duplicate of an accepted job is answered here, and a
// copy of one on its way gets that copy's answer when it comes.
func (in *intake) claim(now time.Time, msg *nats.Msg, job *queue.Job, msgID string) bool {
	jobID, c := in.dedupe.Claim(now, msgID, func(rc shaper.Receipt) { in.answerCopy(msg, job, rc) })
	switch c {
	case dedupe.Duplicate:
		in.answerCopy(msg, job, shaper.Receipt{Accepted: true, JobID: jobID, Downstream: job.Downstream})
	case dedupe.Busy:
		in.reject(msg, job, &rejection{reason: shaper.ReasonUnavailable, retryAfter: maxWaitingRetry,
			err: fmt.Errorf("%d copies of message ids are already waiting for their first copy's answer, so this one was not taken; retry in %s",
				dedupe.MaxWaiting, maxWaitingRetry)})
	}
	return c == dedupe.First
}

// answerCopy answers a copy of an accepted job as a duplicate (counted in
// duplicates, not received) and a copy of a rejected one with the same
// rejection (counted as received and rejected).
func (in *intake) answerCopy(msg *nats.Msg, job *queue.Job, rc shaper.Receipt) {
	if !rc.Accepted {
		in.reject(msg, job, &rejection{reason: rc.Reason, retryAfter: rc.RetryAfter, err: rc.Err})
		return
	}
	in.metrics.duplicates.Inc()
	if msg.Reply == "" {
		return
	}
	rc.Downstream, rc.Duplicate = job.Downstream, true
	buf := replyPool.Get().(*replyBuf)
	in.respond(msg, buf.accepted(msg.Reply, rc, true, in.stateOf(rc.Downstream, rc.JobID)))
	replyPool.Put(buf) // PublishMsg copied the message
}

// stateLookup bounds the look-up of a duplicate's state.
const stateLookup = 500 * time.Millisecond

// stateOf is the current state of downstream's job id, for a duplicate's
// answer: "" when its downstream keeps no records or the look-up failed.
// A durable downstream's look-up is one read of the shared store.
func (in *intake) stateOf(downstream, id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), stateLookup)
	defer cancel()
	rec, ok, _, err := in.shaper.Job(ctx, downstream, id)
	switch {
	case err != nil:
		return ""
	case !ok:
		return string(outcome.Unknown)
	}
	return string(rec.State)
}

// replyPool holds reply buffers for answers built outside handle.
var replyPool = sync.Pool{New: func() any { return newReplyBuf() }}

// reject answers an intake refusal found before the job reached the shaper;
// it counts it here because the shaper never saw it.
func (in *intake) reject(msg *nats.Msg, job *queue.Job, rej *rejection) {
	label := unknownDownstream
	if job != nil {
		if _, ok := in.known(job.Downstream); ok {
			label = job.Downstream
		}
	}
	in.jobs.Received(label)
	in.jobs.Rejected(label, string(rej.reason))
	if job == nil {
		job = &queue.Job{Payload: msg.Data}
	}
	in.answerRejected(msg, job, rej.reason, rej.retryAfter, rej.err)
}

// answerRejected replies to a requester, or dead-letters a plain publish's
// rejection when its downstream is configured (a requester was told, so
// its rejections are only counted): stored, bounded, like any
// dead letter, by a worker that never makes intake wait.
func (in *intake) answerRejected(msg *nats.Msg, job *queue.Job, reason shaper.Reason, retryAfter time.Duration, err error) {
	in.logCause(job, reason, err)
	if msg.Reply != "" {
		in.respond(msg, rejectedReply(msg.Reply, reason, retryAfter, err))
		return
	}
	in.deadLetter(job, reason, err)
}

// deadLetter stores the dead letter of a rejected plain publish's job,
// when its downstream is configured.
func (in *intake) deadLetter(job *queue.Job, reason shaper.Reason, err error) {
	subject, _ := in.known(job.Downstream)
	if subject == "" {
		return
	}
	errText := ""
	if err != nil {
		errText = err.Error()
	}
	if job.ID == "" { // refused before its queue named it: the dead letter still has an id
		job.ID = nuid.Next()
	}
	in.dead.Add(shaper.DeadLetter{Subject: subject, Job: job, Reason: reason, Err: errText})
}

func (in *intake) respond(msg *nats.Msg, reply *nats.Msg) {
	if msg.Reply == "" {
		return
	}
	if err := in.nc.PublishMsg(reply); err != nil {
		in.metrics.intakeReplyFailures.Inc()
		in.log.Warn("reply to producer failed", "err", err)
	}
}

// causeWarnEvery spaces logCause's warnings about a failing store.
const causeWarnEvery = 10 * time.Second

// logCause logs what is behind a rejection's plain sentence (err): the
// cause it wraps, a store's raw answer, which the producer is not shown.
// A store that failed (unavailable) is a warning, at most one per
// causeWarnEvery; any other cause is debug detail.
func (in *intake) logCause(job *queue.Job, reason shaper.Reason, err error) {
	cause := errors.Unwrap(err)
	if cause == nil {
		return
	}
	// Not err's sentence: it may name the job's admission key, which the
	// log never holds.
	args := []any{"downstream", job.Downstream, "reason", string(reason), "cause", cause.Error()}
	if reason == shaper.ReasonUnavailable && in.warnDue(time.Now()) {
		in.log.Warn("job rejected: the store failed", args...)
		return
	}
	in.log.Debug("job rejected", args...)
}

// warnDue reports whether a warning may be logged at now, and if so
// claims it.
func (in *intake) warnDue(now time.Time) bool {
	last := in.lastWarn.Load()
	return now.UnixNano()-last >= int64(causeWarnEvery) && in.lastWarn.CompareAndSwap(last, now.UnixNano())
}
