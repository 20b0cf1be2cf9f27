package sink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/batch"
	"github.com/shaperd/shaper/shaper/outcome"
	"github.com/shaperd/shaper/shaper/policy"
	"github.com/shaperd/shaper/shaper/producer"
	"github.com/shaperd/shaper/shaper/tracing"
)

// NATSSink delivers jobs to a NATS subject, by publish or by request.
type NATSSink struct {
	nc     *nats.Conn
	spec   shaper.NATSSinkSpec
	tracer trace.Tracer // nil: tracing off (traced)

	// A try's CLIENT span: its name and options, the same for every try.
	spanName string
	span     trace.SpanStartOption
}

// traced makes each try a CLIENT span (the messaging conventions' send
// of a publish to the sink's subject) under the span of the context it
// runs under; tp nil leaves the sink untraced.
func (s *NATSSink) traced(tp trace.TracerProvider) *NATSSink {
	if tp == nil {
		return s
	}
	s.tracer = tracing.Tracer(tp)
	s.spanName = "publish " + s.spec.Subject
	s.span = trace.WithAttributes(tracing.SystemNATS, tracing.KeyOperation.String("send"),
		tracing.KeyOperationName.String("publish"), tracing.KeyDestination.String(s.spec.Subject))
	return s
}

// Deliver publishes the job. With Request set, any reply within the timeout
// is success; a timeout or no responders is a retryable error. NATS
// answers carry no rate-limit headers: the Feedback holds no quota. With
// Results set, a request sink's reply comes back as Feedback.Result: its
// headers (the first value of each), its payload's size and the first
// ResultBytes of it; a publish, a timeout and no responders have none.
func (s *NATSSink) Deliver(ctx context.Context, job *queue.Job) (shaper.Feedback, error) {
	res, err := s.deliver(ctx, job)
	return shaper.Feedback{Result: res}, err
}

// DeliverBatch publishes one message carrying c's jobs: the body in c's
// encoding with its Content-Type, and the call's headers (batch.Headers),
// as an HTTP sink sends them. Replies are Deliver's, for the whole call; a
// request sink's reply may name failed jobs as an HTTP 2xx answer does.
func (s *NATSSink) DeliverBatch(ctx context.Context, c shaper.Call) (shaper.Feedback, error) {
	body, ct, err := c.Encoding.Encode(c.Jobs)
	if err != nil {
		return shaper.Feedback{}, &policy.PermanentError{Err: fmt.Errorf("batch %s: %w", c.ID, err)}
	}
	m := nats.NewMsg(s.spec.Subject)
	m.Data = body
	m.Header.Set(hdrContentType, ct)
	for k, vs := range batch.Headers(c.ID, c.Jobs) {
		m.Header[k] = vs
	}
	reply, res, err := s.send(ctx, m)
	fb := shaper.Feedback{Result: res}
	if reply != nil {
		fb.Failed, _ = batch.ParseAnswer(reply.Data)
	}
	return fb, err
}

func (s *NATSSink) deliver(ctx context.Context, job *queue.Job) (*outcome.Result, error) {
	m := Message(s.spec.Subject, job)
	m.Header.Set(hdrJobID, job.ID)
	m.Header.Set(hdrIdemKey, job.ID)
	m.Header.Set(hdrAttempt, strconv.Itoa(job.Attempt))
	_, res, err := s.send(ctx, m)
	return res, err
}

// send publishes m, or with Request set sends it as a request and returns
// the reply (and its Result, with Results set). With tracing on, the try
// is a CLIENT span under ctx's, whose context m carries in place of the
// producer's.
func (s *NATSSink) send(ctx context.Context, m *nats.Msg) (*nats.Msg, *outcome.Result, error) {
	if s.tracer != nil && trace.SpanContextFromContext(ctx).IsValid() {
		var span trace.Span
		ctx, span = s.tracer.Start(ctx, s.spanName, trace.WithSpanKind(trace.SpanKindClient), s.span)
		for k := range m.Header {
			for _, name := range traceHeaders {
				if strings.EqualFold(k, name) {
					delete(m.Header, k)
				}
			}
		}
		tracing.Propagator.Inject(ctx, tracing.Header(m.Header))
		reply, res, err := s.sendUntraced(ctx, m)
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		return reply, res, err
	}
	return s.sendUntraced(ctx, m)
}

// sendUntraced is send without a span.
func (s *NATSSink) sendUntraced(ctx context.Context, m *nats.Msg) (*nats.Msg, *outcome.Result, error) {
	if !s.spec.Request {
		if err := s.nc.PublishMsg(m); err != nil {
			return nil, nil, fmt.Errorf("publish to %s: %w", s.spec.Subject, err)
		}
		return nil, nil, nil
	}
	timeout := s.spec.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	reply, err := s.nc.RequestMsgWithContext(rctx, m)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no reply within %s", timeout)
		}
		return nil, nil, fmt.Errorf("request to %s: %w", s.spec.Subject, err)
	}
	if !s.spec.Results {
		return reply, nil, nil
	}
	return reply, natsResult(reply, s.spec.ResultBytes), nil
}

// Message is a message to subject carrying job's payload and its
// producer's headers.
func Message(subject string, job *queue.Job) *nats.Msg {
	m := nats.NewMsg(subject)
	for k, v := range job.Header {
		m.Header[k] = v
	}
	m.Data = job.Payload
	return m
}

// DeadLetters publishes dead letters to NATS: the original payload with
// Shaper-Reason, Shaper-Error, Shaper-Job-Id, Shaper-Downstream and
// Shaper-Attempt headers. Safe for concurrent use.
type DeadLetters struct {
	NC *nats.Conn
}

// DeadLetter publishes dl to dl.Subject (a core NATS publish: no
// sequence, 0).
func (d *DeadLetters) DeadLetter(_ context.Context, dl shaper.DeadLetter) (uint64, error) {
	if err := d.NC.PublishMsg(DeadLetterMsg(dl)); err != nil {
		return 0, fmt.Errorf("dead-letter job %s to %s: %w", dl.Job.ID, dl.Subject, err)
	}
	return 0, nil
}

// DeadLetterMsg is dl's message, to dl.Subject: the original payload and
// the producer's headers, with Shaper-Reason, Shaper-Error (at most 1 KiB),
// Shaper-Job-Id, Shaper-Downstream and Shaper-Attempt. Both the core
// publish (DeadLetters) and the daemon's store send this message.
func DeadLetterMsg(dl shaper.DeadLetter) *nats.Msg {
	m := Message(dl.Subject, dl.Job)
	m.Header.Set(hdrReason, string(dl.Reason))
	m.Header.Set(hdrError, truncate(dl.Err, maxErrHeader))
	if dl.Job.ID != "" {
		m.Header.Set(hdrJobID, dl.Job.ID)
	}
	m.Header.Set(hdrDownstream, dl.Job.Downstream)
	if dl.Job.Attempt > 0 {
		m.Header.Set(hdrAttempt, strconv.Itoa(dl.Job.Attempt))
	}
	return m
}

// Headers the sinks add to a delivery and a dead letter; the names are the
// job protocol's, written in the producer package.
const (
	hdrJobID       = producer.HeaderJobID
	hdrAttempt     = producer.HeaderAttempt
	hdrIdemKey     = producer.HeaderIdempotencyKey
	hdrReason      = producer.HeaderReason
	hdrError       = producer.HeaderError
	hdrDownstream  = producer.HeaderDownstream
	hdrRetryAfter  = producer.HeaderRetryAfter
	hdrContentType = producer.HeaderContentType
	maxErrHeader   = 1024 // bytes of a dead letter's Shaper-Error
)

// truncate cuts s to n bytes, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
