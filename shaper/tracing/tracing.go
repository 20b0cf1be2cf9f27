// Package tracing carries a job's W3C trace context through the shaper
// and, when the standard OpenTelemetry environment asks for it, exports
// the shaper's spans over OTLP (docs/operating.md "Traces"). With tracing
// off nothing here runs on a job's path but the copy of its trace
// headers, which the sinks pass on.
package tracing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Propagator reads and writes the W3C trace context and baggage.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Header is an http.Header as a propagation carrier whose reads ignore
// case: a NATS message's headers keep the case they were sent in
// (traceparent, not Traceparent).
type Header http.Header

// Get returns key's first value, in any case.
func (h Header) Get(key string) string {
	if v := http.Header(h).Get(key); v != "" {
		return v
	}
	for k, vs := range h {
		if len(vs) > 0 && strings.EqualFold(k, key) {
			return vs[0]
		}
	}
	return ""
}

// Set sets key (canonical case).
func (h Header) Set(key, value string) { http.Header(h).Set(key, value) }

// Keys lists the header names.
func (h Header) Keys() []string {
	out := make([]string, 0, len(h))
	for k := range h {
		out = append(out, k)
	}
	return out
}

// Extract returns ctx with the trace context and baggage of hdr, a job's
// producer headers.
func Extract(ctx context.Context, hdr http.Header) context.Context {
	if len(hdr) == 0 {
		return ctx
	}
	return Propagator.Extract(ctx, Header(hdr))
}

// Parent returns the span context of hdr's traceparent (invalid: none):
// what a span's parent or link needs, without the baggage.
func Parent(hdr http.Header) trace.SpanContext {
	if len(hdr) == 0 {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(traceContext.Extract(context.Background(), Header(hdr)))
}

var traceContext propagation.TraceContext

// Env is the OpenTelemetry environment (os.Getenv, or a test's).
type Env func(string) string

// On reports whether env asks for traces: an OTLP endpoint is set, or
// OTEL_TRACES_EXPORTER is otlp; OTEL_TRACES_EXPORTER=none turns them off.
func On(env Env) bool {
	switch strings.TrimSpace(env("OTEL_TRACES_EXPORTER")) {
	case "none":
		return false
	case "otlp":
		return true
	}
	return env("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// DefaultServiceName is service.name unless OTEL_SERVICE_NAME (or
// OTEL_RESOURCE_ATTRIBUTES) says otherwise.
const DefaultServiceName = "shaperd"

// Provider builds the tracer provider env asks for: an OTLP exporter
// (OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL grpc, or http/protobuf by
// default; the exporters read their endpoint, headers, TLS and timeout
// from the environment themselves), batched, with the sampler of
// OTEL_TRACES_SAMPLER (the SDK reads it) and the resource of
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES. Shut it down to flush.
func Provider(ctx context.Context, env Env, version string) (*sdktrace.TracerProvider, error) {
	proto := env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = env("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var (
		exp sdktrace.SpanExporter
		err error
	)
	// The endpoint is read from env (the exporters would read the
	// process's own environment), so that env decides alone.
	traces, base := env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), env("OTEL_EXPORTER_OTLP_ENDPOINT")
	switch proto {
	case "grpc":
		var opts []otlptracegrpc.Option
		if u := cmp.Or(traces, base); u != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(u))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	case "", "http/protobuf":
		var opts []otlptracehttp.Option
		switch {
		case traces != "":
			opts = append(opts, otlptracehttp.WithEndpointURL(traces)) // the URL as given
		case base != "":
			opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimSuffix(base, "/")+"/v1/traces"))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: want grpc or http/protobuf", proto)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(DefaultServiceName), semconv.ServiceVersion(version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// Name is the instrumentation scope of the shaper's spans.
const Name = "github.com/shaperd/shaper"

// Messaging attributes of the shaper's spans (OpenTelemetry messaging
// conventions, and the shaper's own).
var (
	SystemNATS = semconv.MessagingSystemKey.String("nats")
)

// Attribute keys: the conventions' (semconv), and the shaper's own.
const (
	KeyDestination   = semconv.MessagingDestinationNameKey
	KeyMessageID     = semconv.MessagingMessageIDKey
	KeyOperation     = semconv.MessagingOperationTypeKey
	KeyOperationName = semconv.MessagingOperationNameKey
	KeyDownstream    = attribute.Key("shaper.downstream")
	KeyQueueWait     = attribute.Key("shaper.queue.wait")
	KeyAttempt       = attribute.Key("shaper.delivery.attempt")
	KeyBatchID       = attribute.Key("shaper.batch.id")
	KeyBatchSize     = attribute.Key("shaper.batch.size")
	KeyStatus        = attribute.Key("shaper.status")
	KeyReason        = attribute.Key("shaper.reason")
)

// Tracer is the shaper's tracer of tp; nil when tp is nil (tracing off).
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(Name, trace.WithSchemaURL(semconv.SchemaURL))
}
