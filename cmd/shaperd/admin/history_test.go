package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/shaperd/shaper/shaper"
)

func st(name string, depth int, started, rejected, dropped uint64) shaper.LaneStatus {
	return shaper.LaneStatus{Name: name, Rate: 2, Capacity: 10, Depth: depth, Started: started,
		Rejected: map[shaper.Reason]uint64{shaper.ReasonQueueFull: rejected, shaper.ReasonRateLimited: 0},
		Dropped:  map[shaper.Reason]uint64{shaper.ReasonExpired: dropped}}
}

// withTries sets a status's answered tries and their total duration.
func withTries(s shaper.LaneStatus, tries uint64, seconds float64) shaper.LaneStatus {
	s.Tries, s.TrySeconds = tries, seconds
	return s
}

func TestHistoryRecord(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	h := NewHistory(2*time.Second, nil)
	steps := []struct {
		at    time.Duration
		lanes []shaper.LaneStatus
	}{
		{0, []shaper.LaneStatus{st("printer", 0, 10, 0, 0)}},                                     // baseline only
		{2 * time.Second, []shaper.LaneStatus{withTries(st("printer", 7, 14, 6, 0), 4, 0.2)}},    // 2/s, 3 rejected/s, 4 tries of 50 ms
		{4 * time.Second, []shaper.LaneStatus{withTries(st("printer", 9, 14, 6, 1), 4, 0.2)}},    // stalled, a drop, no answer
		{6 * time.Second, []shaper.LaneStatus{st("printer", 0, 3, 0, 0), st("erp", 1, 0, 0, 0)}}, // reset; erp's baseline
		{6 * time.Second, []shaper.LaneStatus{st("printer", 0, 3, 0, 0)}},                        // same instant: skipped; erp gone
	}
	for _, s := range steps {
		h.record(t0.Add(s.at), s.lanes)
	}
	ms := func(d time.Duration) int64 { return t0.Add(d).UnixMilli() }
	want := HistoryResponse{IntervalSeconds: 2, MaxSamples: historySamples, Downstreams: []DownstreamTrend{{
		Name:           "printer",
		TimeUnixMs:     []int64{ms(2 * time.Second), ms(4 * time.Second), ms(6 * time.Second)},
		Depth:          []int{7, 9, 0},
		Capacity:       []int{10, 10, 10},
		Inflight:       []int{0, 0, 0},
		Rate:           []float64{2, 2, 2},
		AchievedRate:   []float64{2, 0, 1.5}, // the reset counts 3 starts from zero
		RejectedRate:   []float64{3, 0, 0},
		DroppedRate:    []float64{0, 0.5, 0},
		SuccessRate:    []float64{0, 0, 0},
		FailureRate:    []float64{0, 0, 0},
		RetryRate:      []float64{0, 0, 0},
		LatencySeconds: []float64{0.05, 0, 0}, // the reset's counters went back: no figure
		Paused:         []bool{false, false, false},
	}}}
	if got := h.snapshot(); !reflect.DeepEqual(got, want) {
		t.Errorf("snapshot =\n%+v\nwant\n%+v", got, want)
	}
}

func TestHistoryIsBounded(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	h := NewHistory(time.Second, nil)
	for i := range historySamples + 6 { // the baseline, then 305 samples
		h.record(t0.Add(time.Duration(i)*time.Second), []shaper.LaneStatus{st("printer", i, uint64(i), 0, 0)})
	}
	tr := h.snapshot().Downstreams[0]
	if len(tr.Depth) != historySamples || tr.Depth[0] != 6 || tr.Depth[historySamples-1] != historySamples+5 {
		t.Errorf("ring holds %d samples, depths %d..%d; want %d, 6..%d",
			len(tr.Depth), tr.Depth[0], tr.Depth[len(tr.Depth)-1], historySamples, historySamples+5)
	}
	if tr.AchievedRate[0] != 1 {
		t.Errorf("achieved rate %v, want 1", tr.AchievedRate[0])
	}
}

// The sampler Run starts: /v1/history fills up at the (injected) interval,
// and stopping it ends its goroutine.
func TestHistoryEndpoint(t *testing.T) {
	a := startTestAdmin(t, adminLoopback(), "printer")
	a.lanes.fill("printer", 3)
	if err := a.lanes.Pause("printer", time.Time{}, ""); err != nil {
		t.Fatal(err)
	}
	sampler := a.history.Sampler(a.lanes.Lanes)
	if err := sampler.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stop := sampler.Stop
	var got HistoryResponse
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, hdr, body := get(t, a.url+"/v1/history")
		if status != http.StatusOK || hdr.Get("Content-Type") != "application/json" {
			t.Fatalf("GET /v1/history: %d %s %s", status, hdr.Get("Content-Type"), body)
		}
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Downstreams) == 1 && len(got.Downstreams[0].Depth) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 2 samples within 5s: %s", body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	tr := got.Downstreams[0]
	if tr.Name != "printer" || tr.Depth[0] != 3 || tr.Capacity[0] != 10 || tr.Rate[0] != 2 || !tr.Paused[0] || got.IntervalSeconds != 0.01 {
		t.Errorf("history = %+v", got)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	_ = stop() // idempotent
	goleak.VerifyNone(t, goleak.IgnoreCurrent())
	n := len(a.history.snapshot().Downstreams[0].Depth)
	time.Sleep(50 * time.Millisecond)
	if m := len(a.history.snapshot().Downstreams[0].Depth); m != n {
		t.Errorf("sampler still records after stop: %d samples, then %d", n, m)
	}
}

func TestHistorySamplerStops(t *testing.T) {
	h := NewHistory(time.Millisecond, nil)
	sampled := make(chan struct{}, 1)
	sampler := h.Sampler(func() []shaper.LaneStatus {
		select {
		case sampled <- struct{}{}:
		default:
		}
		return nil
	})
	if err := sampler.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-sampled
	done := make(chan struct{})
	go func() { _ = sampler.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("sampler did not stop")
	}
}

// The achieved rate of the last interval is exported per downstream, and a
// removed downstream's series goes with it.
func TestHistoryExportsAchievedRate(t *testing.T) {
	achieved := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "shaper_drain_rate_achieved_per_second"}, []string{"downstream"})
	h := NewHistory(time.Second, achieved)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h.record(t0, []shaper.LaneStatus{{Name: "printer", Started: 10}})
	h.record(t0.Add(2*time.Second), []shaper.LaneStatus{{Name: "printer", Started: 14}})
	if got := testutil.ToFloat64(achieved.WithLabelValues("printer")); got != 2 {
		t.Errorf("achieved = %v, want 2", got)
	}
	// With a batch the rate counts calls: 2 calls of 20 jobs in 2 s is 1/s.
	h.record(t0, []shaper.LaneStatus{{Name: "erp", Started: 100, Batch: &shaper.BatchStatus{MaxJobs: 20, Calls: 5, Jobs: 100}}})
	h.record(t0.Add(2*time.Second), []shaper.LaneStatus{{Name: "erp", Started: 140, Batch: &shaper.BatchStatus{MaxJobs: 20, Calls: 7, Jobs: 140}}})
	if got := testutil.ToFloat64(achieved.WithLabelValues("erp")); got != 1 {
		t.Errorf("achieved with a batch = %v, want 1 call/s", got)
	}
	h.record(t0.Add(4*time.Second), nil)
	if n := testutil.CollectAndCount(achieved); n != 0 {
		t.Errorf("%d series left after the downstream was removed", n)
	}
}

// TestHistoryOutcomes: failures are failed plus dead-lettered deliveries,
// per second like the other rates; retries too.
func TestHistoryOutcomes(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	h := NewHistory(2*time.Second, nil)
	out := func(ok, failed, dead, retries uint64) []shaper.LaneStatus {
		s := st("printer", 0, 0, 0, 0)
		s.Delivered = map[shaper.Outcome]uint64{shaper.OutcomeSuccess: ok, shaper.OutcomeFailed: failed, shaper.OutcomeDeadLettered: dead}
		s.Retries = retries
		return []shaper.LaneStatus{s}
	}
	h.record(t0, out(1, 1, 1, 1))
	h.record(t0.Add(2*time.Second), out(5, 2, 7, 11))
	tr := h.snapshot().Downstreams[0]
	if !reflect.DeepEqual([][]float64{tr.SuccessRate, tr.FailureRate, tr.RetryRate}, [][]float64{{2}, {3.5}, {5}}) {
		t.Errorf("success %v failure %v retry %v; want 2, 3.5 (1 failed + 6 dead-lettered in 2s) and 5", tr.SuccessRate, tr.FailureRate, tr.RetryRate)
	}
}
