package tracing

import (
	"net/http"
	"testing"
)

// On follows the standard environment: an OTLP endpoint or
// OTEL_TRACES_EXPORTER=otlp turns tracing on, none turns it off.
func TestOn(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, false},
		{map[string]string{"OTEL_SERVICE_NAME": "shaperd"}, false},
	} {
		if got := On(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("On(%v) = %v, want %v", c.env, got, c.want)
		}
	}
}

// A producer's traceparent is read in the case its NATS message has it.
func TestParentReadsAnyCase(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, h := range []http.Header{{"traceparent": {tp}}, {"Traceparent": {tp}}, {"TRACEPARENT": {tp}}} {
		sc := Parent(h)
		if !sc.IsValid() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() != "00f067aa0ba902b7" || !sc.IsSampled() || !sc.IsRemote() {
			t.Errorf("Parent(%v) = %+v", h, sc)
		}
	}
	if Parent(nil).IsValid() || Parent(http.Header{"traceparent": {"garbage"}}).IsValid() {
		t.Error("no or a bad traceparent gave a parent")
	}
}

// A bad protocol is refused, naming the valid ones.
func TestProviderRefusesAnUnknownProtocol(t *testing.T) {
	_, err := Provider(t.Context(), func(k string) string {
		if k == "OTEL_EXPORTER_OTLP_PROTOCOL" {
			return "http/json"
		}
		return ""
	}, "")
	if err == nil || err.Error() != `OTEL_EXPORTER_OTLP_PROTOCOL "http/json": want grpc or http/protobuf` {
		t.Fatalf("Provider: %v", err)
	}
}
