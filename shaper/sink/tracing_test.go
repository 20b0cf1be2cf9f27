package sink

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/shaperd/shaper/shaper"
)

// A traced HTTP sink's try is a CLIENT span under the caller's, with the
// HTTP conventions' attributes; its url.full hides the URL's credentials
// and signature values, which the tracing backend's readers must not see;
// the downstream receives the span's own context.
func TestHTTPSinkClientSpan(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword("erp", "s3cret")
	u.Path = "/charge"
	u.RawQuery = "tenant=acme&sig=abc123&X-Goog-Signature=def456&Signature"
	s, err := NewHTTPSink(shaper.HTTPSinkSpec{URL: u.String()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	s.Traced(tp)
	ctx, parent := tp.Tracer("test").Start(context.Background(), "process")
	_, _ = s.Deliver(ctx, testJob())
	parent.End()

	var client sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		if sp.SpanKind() == trace.SpanKindClient {
			client = sp
		}
	}
	if client == nil {
		t.Fatalf("no CLIENT span among %d ended", len(rec.Ended()))
	}
	if client.Parent().SpanID() != parent.SpanContext().SpanID() || client.Name() != "POST" {
		t.Errorf("CLIENT span %q under %v, want POST under the caller's %v", client.Name(), client.Parent().SpanID(), parent.SpanContext().SpanID())
	}
	attrs := map[attribute.Key]attribute.Value{}
	for _, a := range client.Attributes() {
		attrs[a.Key] = a.Value
	}
	wantURL := "http://REDACTED:REDACTED@" + u.Host + "/charge?tenant=acme&sig=REDACTED&X-Goog-Signature=REDACTED&Signature=REDACTED"
	want := map[attribute.Key]attribute.Value{
		"http.request.method":       attribute.StringValue("POST"),
		"url.full":                  attribute.StringValue(wantURL),
		"server.address":            attribute.StringValue(u.Hostname()),
		"server.port":               attribute.IntValue(port(u)),
		"http.response.status_code": attribute.IntValue(429),
	}
	for k, v := range want {
		if attrs[k] != v {
			t.Errorf("%s = %v, want %v", k, attrs[k].String(), v.String())
		}
	}
	for k, v := range attrs {
		if strings.Contains(v.String(), "s3cret") || strings.Contains(v.String(), "abc123") || strings.Contains(v.String(), "def456") {
			t.Errorf("%s = %q shows a secret of the URL", k, v.String())
		}
	}
	if client.Status().Code != codes.Error {
		t.Errorf("status %v, want an error for a 429", client.Status())
	}
	if tp := got.Get("Traceparent"); !strings.Contains(tp, client.SpanContext().SpanID().String()) {
		t.Errorf("the downstream got traceparent %q, want the CLIENT span's %s", tp, client.SpanContext().SpanID())
	}
}

// A URL without a port has its scheme's.
func TestSpanPortDefaults(t *testing.T) {
	for raw, want := range map[string]int{"http://erp/x": 80, "https://erp/x": 443, "https://erp:8443/x": 8443} {
		u, _ := url.Parse(raw)
		if got := port(u); got != want {
			t.Errorf("port(%s) = %d, want %d", raw, got, want)
		}
	}
}
