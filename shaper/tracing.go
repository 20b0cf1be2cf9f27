package shaper

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/tracing"
)

// traceStart starts the process span of job's start at now (of call c's,
// on a lane with a batch) and returns the context the try runs under, or
// nil with tracing off. The span is a child of the producer's span (the
// job's traceparent), or with Tracing.Link the root of a new trace linked
// to it; a call's span is a root linked to each of its jobs' producers.
// The sink's try is a CLIENT span under it, whose context the
// downstream receives. Requires l.mu.
func (l *lane) traceStart(now time.Time, job *queue.Job, c *Call) context.Context {
	tr := l.s.tracer
	if tr == nil {
		return nil
	}
	if l.span.name == "" {
		subject := l.s.tracing.SubjectPrefix + "." + l.name
		l.span.name = "process " + subject
		l.span.attrs = trace.WithAttributes(tracing.SystemNATS, tracing.KeyOperation.String("process"),
			tracing.KeyDestination.String(subject), tracing.KeyDownstream.String(l.name))
	}
	opts := make([]trace.SpanStartOption, 0, 6)
	opts = append(opts, consumer, trace.WithTimestamp(now), l.span.attrs)
	parent := l.s.deliveries.Context()
	if c != nil {
		links := make([]trace.Link, 0, len(c.Jobs))
		for _, j := range c.Jobs {
			if sc := tracing.Parent(j.Header); sc.IsValid() {
				links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{tracing.KeyMessageID.String(j.ID)}})
			}
		}
		opts = append(opts, trace.WithNewRoot(), trace.WithLinks(links...), trace.WithAttributes(
			tracing.KeyBatchID.String(c.ID), tracing.KeyBatchSize.Int(len(c.Jobs))))
	} else {
		producer := tracing.Parent(job.Header)
		switch {
		case l.s.tracing.Link && producer.IsValid():
			opts = append(opts, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: producer}))
		case producer.IsValid():
			parent = trace.ContextWithRemoteSpanContext(parent, producer)
		}
		opts = append(opts, trace.WithAttributes(tracing.KeyMessageID.String(job.ID), tracing.KeyAttempt.Int(job.Attempt),
			tracing.KeyQueueWait.Float64(now.Sub(later(job.Enqueued, job.NotBefore)).Seconds())))
	}
	ctx, _ := tr.Start(parent, l.span.name, opts...)
	return ctx
}

// consumer is a process span's kind.
var consumer = trace.WithSpanKind(trace.SpanKindConsumer)

// spanNames are a lane's process span's name and fixed attributes, made
// at its first traced start.
type spanNames struct {
	name  string
	attrs trace.SpanStartOption
}

// endSpan ends the span ctx carries (tracing on), with an error status
// when the try failed.
func endSpan(ctx context.Context, err error) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
