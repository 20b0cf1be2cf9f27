package daemon

import (
	"context"
	"net/http"
	"os"
	"runtime/debug"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/shaperd/shaper/shaper"

	"github.com/shaperd/shaper/shaper/service"
	"github.com/shaperd/shaper/shaper/tracing"
)

// tracingStep turns tracing on when the OpenTelemetry environment asks
// for it (tracing.On): an OTLP exporter the shaper's lanes, its HTTP
// sinks and intake export spans through. Off, nothing is built and a
// job's trace headers are only passed on. It stops after the shaper,
// flushing what is batched within the shutdown grace.
func (d *Daemon) tracingStep(ctx context.Context, w *wiring) ([]service.Service, error) {
	env := d.getenv
	if env == nil {
		env = os.Getenv
	}
	if !tracing.On(env) {
		return nil, nil
	}
	tp, err := tracing.Provider(ctx, env, buildVersion())
	if err != nil {
		return nil, err
	}
	d.tp = tp
	endpoint := env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		endpoint = env("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	d.log.Info("tracing on: spans go out over OTLP", "endpoint", endpoint, "parent", w.cfg.Tracing.Parent)
	return []service.Service{&service.Funcs{StopFunc: func() error {
		sctx, cancel := context.WithTimeout(context.Background(), w.cfg.ShutdownGrace+time.Second)
		defer cancel()
		return tp.Shutdown(sctx)
	}}}, nil
}

// buildVersion is the module version shaperd was built at ("(devel)"
// for a build from a checkout).
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return ""
}

// receive starts the receive span of an intake message (tracing on): a
// CONSUMER span, child of the producer's span when its headers carry one.
func (in *intake) receive(msg *nats.Msg, hdr http.Header, now time.Time) trace.Span {
	_, span := in.tracer.Start(trace.ContextWithRemoteSpanContext(context.Background(), tracing.Parent(hdr)), "receive "+msg.Subject,
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(now),
		trace.WithAttributes(tracing.SystemNATS, tracing.KeyOperation.String("receive"), tracing.KeyDestination.String(msg.Subject)))
	return span
}

// endReceipt ends a receive span with the answer of the shaper.
func endReceipt(span trace.Span, rc shaper.Receipt) {
	status := "accepted"
	if !rc.Accepted {
		status = "rejected"
	}
	endReceive(span, status, rc.Reason, rc.JobID)
}

// endReceive ends a receive span (nil: tracing off) with the answer: its
// status, the reason of a rejection and the job id of an accepted job.
func endReceive(span trace.Span, status string, reason shaper.Reason, jobID string) {
	if span == nil {
		return
	}
	span.SetAttributes(tracing.KeyStatus.String(status))
	if reason != "" {
		span.SetAttributes(tracing.KeyReason.String(string(reason)))
	}
	if jobID != "" {
		span.SetAttributes(tracing.KeyMessageID.String(jobID))
	}
	span.End()
}
