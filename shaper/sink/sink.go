package sink

import (
	"fmt"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/shaperd/shaper/shaper"
)

// For returns the shaper's sink builder (shaper.Deps.Sinks): an HTTPSink
// for an HTTP spec, keeping at least the lane's concurrency of idle
// connections, and a NATSSink over nc for a NATS spec (nc may be nil when
// no lane has one). A lane that keeps records (ls.Outcomes.On()) gets a
// sink that returns each answer, up to ls.Outcomes.ResultBytes of its
// body.
//
// With tp (tracing on) a sink's every try is a CLIENT span whose context
// the downstream receives; nil: none.
func For(nc *nats.Conn, tp trace.TracerProvider) func(shaper.LaneSettings) (shaper.Sink, error) {
	return func(ls shaper.LaneSettings) (shaper.Sink, error) {
		results, keep := ls.Outcomes.On(), ls.Outcomes.ResultBytes
		switch {
		case ls.Sink.NATS != nil && nc != nil:
			spec := *ls.Sink.NATS
			spec.Results, spec.ResultBytes = results, keep
			if err := checkResultBytes("nats", spec.ResultBytes); err != nil {
				return nil, fmt.Errorf("downstream %q: %w", ls.Name, err)
			}
			return (&NATSSink{nc: nc, spec: spec}).traced(tp), nil
		case ls.Sink.NATS != nil:
			return nil, fmt.Errorf("downstream %q: a NATS sink needs a NATS connection", ls.Name)
		case ls.Sink.HTTP != nil:
			spec := *ls.Sink.HTTP
			if spec.MaxIdleConnsPerHost == 0 {
				spec.MaxIdleConnsPerHost = max(ls.Concurrency, defaultIdleConns)
			}
			spec.Results, spec.ResultBytes = results, keep
			hs, err := NewHTTPSink(spec)
			if err != nil {
				return nil, err
			}
			return hs.Traced(tp), nil
		}
		return nil, fmt.Errorf("downstream %q has no sink", ls.Name)
	}
}
