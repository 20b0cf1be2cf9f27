package shaper

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/policy"
	"github.com/shaperd/shaper/shaper/tracing"
)

// producerHeader is the trace context of a producer's span, as its NATS
// message carries it (lowercase, as NATS keeps it).
func producerHeader(tp trace.TracerProvider) (http.Header, trace.SpanContext) {
	ctx, span := tp.Tracer("producer").Start(context.Background(), "send")
	span.End()
	h := http.Header{}
	tracing.Propagator.Inject(ctx, tracing.Header(h))
	return http.Header{"traceparent": h["Traceparent"]}, span.SpanContext()
}

func startTraced(t *testing.T, set Settings, sink Sink) (*harness, *tracetest.SpanRecorder, trace.TracerProvider) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	h := &harness{t: t, dl: &recDL{}, done: make(chan error, 1)}
	sh, err := New(set, Deps{Sinks: func(LaneSettings) (Sink, error) { return sink, nil }, DeadLetter: h.dl, Tracer: tracing.Tracer(tp)})
	if err != nil {
		t.Fatal(err)
	}
	h.sh = sh
	var ctx context.Context
	ctx, h.cancel = context.WithCancel(context.Background())
	go func() { h.done <- sh.Run(ctx) }()
	<-sh.Ready()
	return h, rec, tp
}

// A job's start is a process span, a CONSUMER child of the producer's
// span with the messaging attributes; the try runs under it; a failed
// try sets its error status.
func TestProcessSpanIsTheProducersChild(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen trace.SpanContext
		sink := newRecSink(func(ctx context.Context, _ *queue.Job) error {
			seen = trace.SpanContextFromContext(ctx)
			return nil
		})
		set := Settings{Lanes: []LaneSettings{laneCfg("pay", 10, 10)}, Tracing: TracingSettings{SubjectPrefix: "shaper.jobs"}}
		h, rec, tp := startTraced(t, set, sink)
		defer h.stop()
		hdr, producer := producerHeader(tp)
		time.Sleep(time.Second) // the job waits 1 s in its queue: a pause
		if err := h.sh.Pause("pay"); err != nil {
			t.Fatal(err)
		}
		if rc := h.sh.Submit(&queue.Job{Downstream: "pay", ID: "j1", Header: hdr}); !rc.Accepted {
			t.Fatal(rc)
		}
		time.Sleep(time.Second)
		if err := h.sh.Resume("pay"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		var got []sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Name() == "process shaper.jobs.pay" {
				got = append(got, s)
			}
		}
		if len(got) != 1 {
			t.Fatalf("%d process spans", len(got))
		}
		s := got[0]
		if s.SpanKind() != trace.SpanKindConsumer || s.Parent().SpanID() != producer.SpanID() || s.SpanContext().TraceID() != producer.TraceID() {
			t.Errorf("process span kind %v parent %v; want a CONSUMER child of the producer's span %v", s.SpanKind(), s.Parent().SpanID(), producer.SpanID())
		}
		if seen.SpanID() != s.SpanContext().SpanID() {
			t.Errorf("the try ran under span %v; want the process span %v", seen.SpanID(), s.SpanContext().SpanID())
		}
		attrs := map[string]any{}
		for _, a := range s.Attributes() {
			attrs[string(a.Key)] = a.Value.AsInterface()
		}
		for k, want := range map[string]any{"messaging.system": "nats", "messaging.destination.name": "shaper.jobs.pay",
			"messaging.message.id": "j1", "shaper.downstream": "pay", "shaper.delivery.attempt": int64(1), "shaper.queue.wait": 1.0} {
			if attrs[k] != want {
				t.Errorf("%s = %v (%T); want %v", k, attrs[k], attrs[k], want)
			}
		}
	})
}

// With tracing.parent link the process span roots a new trace linked to
// the producer's span; a bulk call's span links every job's producer.
func TestProcessSpanLinks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		set := Settings{Lanes: []LaneSettings{laneCfg("pay", 10, 10), batchCfg(10, 10)}, Tracing: TracingSettings{Link: true, SubjectPrefix: "shaper.jobs"}}
		h, rec, tp := startTraced(t, set, newRecSink(nil))
		defer h.stop()
		hdr1, p1 := producerHeader(tp)
		hdr2, p2 := producerHeader(tp)
		if rc := h.sh.Submit(&queue.Job{Downstream: "pay", ID: "j1", Header: hdr1}); !rc.Accepted {
			t.Fatal(rc)
		}
		if err := h.sh.Pause("erp"); err != nil {
			t.Fatal(err)
		}
		for i, hdr := range []http.Header{hdr1, hdr2} {
			if rc := h.sh.Submit(&queue.Job{Downstream: "erp", ID: []string{"a", "b"}[i], Payload: []byte("x"), Header: hdr}); !rc.Accepted {
				t.Fatal(rc)
			}
		}
		if err := h.sh.Resume("erp"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		links := map[string][]trace.SpanID{}
		for _, s := range rec.Ended() {
			if s.Parent().IsValid() {
				t.Errorf("%s has a parent; want a new trace", s.Name())
			}
			for _, l := range s.Links() {
				links[s.Name()] = append(links[s.Name()], l.SpanContext.SpanID())
			}
		}
		if got := links["process shaper.jobs.pay"]; len(got) != 1 || got[0] != p1.SpanID() {
			t.Errorf("the job's span links %v; want the producer's span %v", got, p1.SpanID())
		}
		if got := links["process shaper.jobs.erp"]; len(got) != 2 || got[0] != p1.SpanID() || got[1] != p2.SpanID() {
			t.Errorf("the call's span links %v; want both jobs' producers %v %v", got, p1.SpanID(), p2.SpanID())
		}
	})
}

// A failed try sets its process span's error status, with the error.
func TestProcessSpanOfAFailedTry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecSink(func(context.Context, *queue.Job) error {
			return &policy.PermanentError{Err: errors.New("402 payment required")}
		})
		set := Settings{Lanes: []LaneSettings{laneCfg("pay", 10, 10)}, Tracing: TracingSettings{SubjectPrefix: "shaper.jobs"}}
		h, rec, _ := startTraced(t, set, sink)
		defer h.stop()
		if rc := h.sh.Submit(&queue.Job{Downstream: "pay", ID: "j1"}); !rc.Accepted {
			t.Fatal(rc)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		ended := rec.Ended()
		if len(ended) != 1 || ended[0].Status().Code != codes.Error || !strings.Contains(ended[0].Status().Description, "402") {
			t.Fatalf("spans %v; want one process span with an error status naming the answer", ended)
		}
	})
}
