package daemon

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/shaper"
)

// intake turns intake messages into submissions and answers producers.
// handle is called by one subscription, so calls never overlap; the dedupe
// check-then-remember relies on that.
type intake struct {
	limits   func() intakeLimits
	shaper   *shaper.Shaper
	jobs     *shaper.Metrics
	metrics  *daemonMetrics
	dedupe   *dedupe
	known    func(downstream string) (deadLetter string, ok bool) // configured downstreams
	dead     *deadLetterer
	nc       *nats.Conn
	log      *slog.Logger
	newJobID func() string
	replies  *replyBuf
}

func (in *intake) handle(msg *nats.Msg) {
	now := time.Now()
	hdr := http.Header(msg.Header)
	job, msgID, rej := parseJob(in.limits(), msg.Subject, hdr, msg.Data)
	if rej != nil {
		in.reject(msg, job, rej)
		return
	}
	if msgID != "" {
		if jobID, ok := in.dedupe.lookup(now, msgID); ok {
			in.metrics.duplicates.Inc()
			in.respond(msg, in.replies.accepted(msg.Reply, shaper.Receipt{
				Accepted: true, JobID: jobID, Downstream: job.Downstream,
			}, true))
			return
		}
	}
	job.ID = in.newJobID()
	job.DedupeID = msgID
	// A durable lane answers from its store's acknowledgement, on another
	// goroutine: handle does not wait, so intake never serialises on the
	// store's round trip.
	in.shaper.SubmitFunc(job, func(rc shaper.Receipt) { in.answer(msg, job, msgID, now, rc) })
}

// answer replies to one submission. It may run concurrently with handle
// (durable lanes), so it builds its reply in a pooled buffer, not in.replies.
func (in *intake) answer(msg *nats.Msg, job *shaper.Job, msgID string, now time.Time, rc shaper.Receipt) {
	if !rc.Accepted {
		in.answerRejected(msg, job, rc.Reason, rc.RetryAfter, rc.Err)
		return
	}
	if rc.Duplicate {
		in.metrics.duplicates.Inc()
	}
	if msgID != "" {
		in.dedupe.remember(now, msgID, rc.JobID)
	}
	if msg.Reply == "" {
		return
	}
	buf := replyPool.Get().(*replyBuf)
	in.respond(msg, buf.accepted(msg.Reply, rc, rc.Duplicate))
	replyPool.Put(buf) // PublishMsg copied the message
}

// replyPool holds reply buffers for answers built outside handle.
var replyPool = sync.Pool{New: func() any { return newReplyBuf() }}

// reject answers an intake refusal found before the job reached the shaper;
// it counts it here because the shaper never saw it.
func (in *intake) reject(msg *nats.Msg, job *shaper.Job, rej *rejection) {
	label := unknownDownstream
	if job != nil {
		if _, ok := in.known(job.Downstream); ok {
			label = job.Downstream
		}
	}
	in.jobs.Received(label)
	in.jobs.Rejected(label, rej.reason)
	if job == nil {
		job = &shaper.Job{Payload: msg.Data}
	}
	in.answerRejected(msg, job, rej.reason, 0, rej.err)
}

// answerRejected replies to a requester, or dead-letters a plain publish's
// rejection when its downstream has a dead-letter subject (SPEC.md: a
// requester was told, so its rejections are only counted).
func (in *intake) answerRejected(msg *nats.Msg, job *shaper.Job, reason shaper.Reason, retryAfter time.Duration, err error) {
	if msg.Reply != "" {
		in.respond(msg, rejectedReply(msg.Reply, reason, retryAfter, err))
		return
	}
	subject, _ := in.known(job.Downstream)
	if subject == "" {
		return
	}
	errText := ""
	if err != nil {
		errText = err.Error()
	}
	dl := shaper.DeadLetter{Subject: subject, Job: job, Reason: reason, Err: errText}
	if derr := in.dead.DeadLetter(context.Background(), dl); derr != nil {
		in.log.Warn("dead-letter of a rejected publish failed", "downstream", job.Downstream, "err", derr)
	}
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
