package test

import (
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace endpoint that keeps what it gets.
type otlpReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	spans   map[string]*tracepb.Span // by span id (hex)
	service map[string]string        // span id → service.name
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{spans: map[string]*tracepb.Span{}, service: map[string]string{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		data, _ := io.ReadAll(body)
		var ex coltracepb.ExportTraceServiceRequest
		if req.URL.Path != "/v1/traces" || proto.Unmarshal(data, &ex) != nil {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range ex.ResourceSpans {
			svc := ""
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					svc = a.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					id := hex.EncodeToString(s.SpanId)
					r.spans[id], r.service[id] = s, svc
				}
			}
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

// span waits for the span with id (hex) to be exported.
func (r *otlpReceiver) span(t *testing.T, id string) (*tracepb.Span, string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r.mu.Lock()
		s, svc := r.spans[id], r.service[id]
		r.mu.Unlock()
		if s != nil {
			return s, svc
		}
		if time.Now().After(deadline) {
			t.Fatalf("span %s was not exported within 15 s", id)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// named returns the exported spans named name.
func (r *otlpReceiver) named(name string) []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range r.spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func attrOf(s *tracepb.Span, key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			v := a.GetValue()
			switch {
			case v.GetStringValue() != "":
				return v.GetStringValue()
			case v.GetIntValue() != 0:
				return fmt.Sprint(v.GetIntValue())
			default:
				return fmt.Sprint(v.GetDoubleValue())
			}
		}
	}
	return ""
}

// TestTraces: the producer's trace goes through shaperd. With tracing off
// the downstream receives the producer's traceparent as sent. With an
// OTLP endpoint in the environment, the downstream's traceparent names a
// CLIENT span shaperd exported, under a process CONSUMER span whose
// parent is the producer's span, with the messaging attributes and the
// queue wait; intake exported a receive span under the producer's too;
// OTEL_SERVICE_NAME names the service.
func TestTraces(t *testing.T) {
	t.Parallel()
	const traceID, producerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	traceparent := "00-" + traceID + "-" + producerSpan + "-01"
	// run sends a job with the producer's trace context to pay (an HTTP
	// sink) and to bus (a NATS sink), and returns the HTTP request, pay's
	// job id and bus's message.
	run := func(t *testing.T, env []string) (hit, string, *nats.Msg) {
		srv := runNATS(t)
		ds := newDownstream(t)
		startShaperdEnv(t, fmt.Sprintf(`
nats: { url: %q }
admin: { listen: "%%ADMIN%%" }
downstreams:
  pay:
    rate: 20/s
    queue: { capacity: 10, backend: memory }
    sink: { http: { url: %q } }
  bus:
    rate: 20/s
    queue: { capacity: 10, backend: memory }
    sink: { nats: { subject: out.bus } }
`, srv.ClientURL(), ds.URL), env)
		nc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		out, err := nc.SubscribeSync("out.bus")
		if err != nil {
			t.Fatal(err)
		}
		var jobID string
		for _, ds := range []string{"pay", "bus"} {
			m := nats.NewMsg("shaper.jobs." + ds)
			m.Header["traceparent"] = []string{traceparent} // NATS keeps the case a producer sends
			m.Header["tracestate"] = []string{"vendor=x"}
			m.Data = []byte("pay 1")
			resp, err := nc.RequestMsg(m, 5*time.Second)
			if err != nil || resp.Header.Get("Shaper-Status") != "accepted" {
				t.Fatalf("send: %v %s", err, resp.Data)
			}
			var r reply
			if err := json.Unmarshal(resp.Data, &r); err != nil {
				t.Fatal(err)
			}
			if ds == "pay" {
				jobID = r.JobID
			}
		}
		msg, err := out.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return ds.waitHits(t, 1, 10*time.Second)[0], jobID, msg
	}

	t.Run("off", func(t *testing.T) {
		t.Parallel()
		h, _, m := run(t, nil)
		if got := h.header.Get("Traceparent"); got != traceparent || h.header.Get("Tracestate") != "vendor=x" {
			t.Errorf("the downstream got traceparent %q tracestate %q; want the producer's %q", got, h.header.Get("Tracestate"), traceparent)
		}
		if got := m.Header.Get("traceparent"); got != traceparent {
			t.Errorf("the NATS downstream got traceparent %q; want the producer's %q", got, traceparent)
		}
	})
	t.Run("on", func(t *testing.T) {
		t.Parallel()
		rcv := newOTLPReceiver(t)
		h, jobID, m := run(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL, "OTEL_SERVICE_NAME=shaper-it", "OTEL_BSP_SCHEDULE_DELAY=100"})
		if len(m.Header.Values("traceparent"))+len(m.Header.Values("Traceparent")) != 1 {
			t.Errorf("the NATS downstream got %v; want one traceparent, shaperd's", m.Header)
		}
		np := strings.Split(m.Header.Get("Traceparent"), "-")
		if len(np) != 4 || np[1] != traceID {
			t.Fatalf("the NATS downstream got traceparent %q; want one of trace %s", m.Header.Get("Traceparent"), traceID)
		}
		pub, _ := rcv.span(t, np[2])
		if pub.Kind != tracepb.Span_SPAN_KIND_CLIENT || pub.Name != "publish out.bus" {
			t.Errorf("the NATS downstream's parent span is %q (%v); want shaperd's CLIENT publish span", pub.Name, pub.Kind)
		}
		if attrOf(pub, "messaging.system") != "nats" || attrOf(pub, "messaging.operation.type") != "send" ||
			attrOf(pub, "messaging.operation.name") != "publish" || attrOf(pub, "messaging.destination.name") != "out.bus" {
			t.Errorf("publish span attributes %v; want messaging.system nats, operation type send and name publish, destination out.bus", pub.Attributes)
		}
		parts := strings.Split(h.header.Get("Traceparent"), "-")
		if len(parts) != 4 || parts[1] != traceID {
			t.Fatalf("the downstream got traceparent %q; want one of trace %s", h.header.Get("Traceparent"), traceID)
		}
		client, svc := rcv.span(t, parts[2])
		if client.Kind != tracepb.Span_SPAN_KIND_CLIENT || svc != "shaper-it" {
			t.Errorf("the downstream's parent span %q is %v of service %q; want a CLIENT span of shaper-it", client.Name, client.Kind, svc)
		}
		process, _ := rcv.span(t, hex.EncodeToString(client.ParentSpanId))
		if process.Name != "process shaper.jobs.pay" || process.Kind != tracepb.Span_SPAN_KIND_CONSUMER ||
			hex.EncodeToString(process.ParentSpanId) != producerSpan {
			t.Errorf("the try's parent is %q (%v), its parent %x; want a CONSUMER process span under the producer's %s",
				process.Name, process.Kind, process.ParentSpanId, producerSpan)
		}
		if attrOf(process, "messaging.system") != "nats" || attrOf(process, "messaging.message.id") != jobID ||
			attrOf(process, "shaper.queue.wait") == "" || attrOf(process, "shaper.delivery.attempt") != "1" {
			t.Errorf("process span attributes %v; want messaging.system nats, the job id %s, the queue wait and the attempt", process.Attributes, jobID)
		}
		deadline := time.Now().Add(10 * time.Second)
		for len(rcv.named("receive shaper.jobs.pay")) == 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		rs := rcv.named("receive shaper.jobs.pay")
		if len(rs) != 1 || hex.EncodeToString(rs[0].ParentSpanId) != producerSpan || attrOf(rs[0], "shaper.status") != "accepted" ||
			attrOf(rs[0], "messaging.message.id") != jobID {
			t.Errorf("receive spans %v; want one under the producer's span, accepted, naming the job", rs)
		}
	})
}
