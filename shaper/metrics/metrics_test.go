package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var testLabels = Labels{
	Unknown: "_unknown", Rejected: []string{"queue_full", "bad_request"}, BadRequest: "bad_request",
	Dropped: []string{"expired"}, IntakeDrop: "nats_slow_consumer",
	Outcomes: []string{"success"}, Shadow: []string{"rate_limited"},
}

// The daemon's counts map an unknown downstream to Labels.Unknown, an
// unknown rejection reason to Labels.BadRequest, and ignore a drop reason
// outside the set; Forget deletes a name's series after its last lane.
func TestMethodsMapLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, testLabels)
	m.ForLane("a", 0)
	m.ForLane("a", 0)
	m.Received("a")
	m.Received("nope")
	m.Rejected("a", "no_such_reason")
	m.Dropped("a", "nats_slow_consumer", 3)
	m.Dropped("a", "no_such_reason", 5)
	m.DeadLetterLost("nope")
	for _, tc := range []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"received a", m.Vecs.Received.WithLabelValues("a"), 1},
		{"received unknown", m.Vecs.Received.WithLabelValues("_unknown"), 1},
		{"rejected as bad_request", m.Vecs.Rejected.WithLabelValues("a", "bad_request"), 1},
		{"slow consumer", m.Vecs.Dropped.WithLabelValues("a", "nats_slow_consumer"), 3},
		{"lost unknown", m.DLLost.WithLabelValues("_unknown"), 1},
	} {
		if got := testutil.ToFloat64(tc.c); got != tc.want {
			t.Errorf("%s = %g, want %g", tc.name, got, tc.want)
		}
	}
	if n := testutil.CollectAndCount(m.Vecs.Dropped); n != 2 {
		t.Errorf("%d dropped series, want 2 (expired pre-created, nats_slow_consumer)", n)
	}
	if probs, err := testutil.GatherAndLint(reg); err != nil || len(probs) > 0 {
		t.Errorf("GatherAndLint: %v %v", probs, err)
	}
	m.Forget("a")
	if n := testutil.CollectAndCount(m.Depth); n != 1 {
		t.Errorf("one lane of two forgotten: %d depth series, want 1", n)
	}
	m.Forget("a")
	if n := testutil.CollectAndCount(m.Depth); n != 0 {
		t.Errorf("both lanes forgotten: %d depth series, want 0", n)
	}
	var nilM *Metrics
	nilM.Received("a")
	nilM.Forget("a")
}
