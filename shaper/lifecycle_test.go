package shaper

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/shaperd/shaper/limiter"
	"github.com/shaperd/shaper/queue"
)

// TestApplyNewRateOnQueuedJobs: a new rate applies to queued jobs from the
// last start; capacity shrinks without dropping; lanes come and go.
func TestApplyNewRateOnQueuedJobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newRecSink(nil), newRecSink(nil)
		set := Settings{Lanes: []LaneSettings{laneCfg("a", 1, 10)}}
		h := start(t, set, map[string]Sink{"a": a, "b": b})
		defer h.stop()
		h.submit("a", 8)
		time.Sleep(1200 * time.Millisecond) // started at 0 and 1
		set.Lanes[0].Rate, set.Lanes[0].Capacity = 4, 3
		set.Lanes = append(set.Lanes, laneCfg("b", 1, 5))
		if err := h.sh.Apply(set); err != nil {
			t.Fatal(err)
		}
		if st := h.status("a"); st.Depth != 6 || st.Capacity != 3 {
			t.Errorf("after shrink: %+v", st)
		}
		if rc := h.submit("a", 1)[0]; rc.Reason != ReasonQueueFull {
			t.Errorf("submit above shrunk capacity: %+v", rc)
		}
		h.submit("b", 1)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		wantStarts(t, a.starts(), 0, 1, 1.25, 1.5, 1.75, 2, 2.25, 2.5)
		wantStarts(t, b.starts(), 1.2)
		if len(h.sh.Lanes()) != 2 {
			t.Errorf("lanes %+v", h.sh.Lanes())
		}
	})
}

// TestApplyRemovedLaneDrains: a removed lane refuses intake, delivers what
// it holds, then disappears (metrics series too).
func TestApplyRemovedLaneDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newRecSink(nil)
		h := start(t, Settings{Lanes: []LaneSettings{laneCfg("a", 2, 10), laneCfg("keep", 1, 1)}},
			map[string]Sink{"a": a, "keep": newRecSink(nil)})
		defer h.stop()
		h.submit("a", 4)
		if err := h.sh.Apply(Settings{Lanes: []LaneSettings{laneCfg("keep", 1, 1)}}); err != nil {
			t.Fatal(err)
		}
		if rc := h.submit("a", 1)[0]; rc.Reason != ReasonUnknownDownstream {
			t.Errorf("submit to removed lane: %+v", rc)
		}
		if err := h.sh.Pause("a"); !errors.Is(err, ErrUnknownDownstream) {
			t.Errorf("Pause(removed) = %v", err)
		}
		if st := h.status("a"); !st.Removing {
			t.Errorf("draining lane: %+v", st)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		wantStarts(t, a.starts(), 0, 0.5, 1, 1.5)
		if n := len(h.sh.Lanes()); n != 1 {
			t.Errorf("%d lanes after drain, want 1", n)
		}
		if n := testutil.CollectAndCount(h.met.Depth); n != 1 {
			t.Errorf("%d depth series after removal, want 1", n)
		}
	})
}

func TestApplyInvalidChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Settings{Lanes: []LaneSettings{laneCfg("a", 2, 10)}}, map[string]Sink{"a": newRecSink(nil)})
		defer h.stop()
		bad := laneCfg("a", 5, 10)
		bad.Admission = &limiter.Config{Mode: "nope"}
		if err := h.sh.Apply(Settings{Lanes: []LaneSettings{bad, laneCfg("nosink", 1, 1)}}); err == nil {
			t.Fatal("Apply accepted an invalid config")
		}
		if st := h.sh.Lanes(); len(st) != 1 || st[0].Rate != 2 {
			t.Errorf("lanes changed: %+v", st)
		}
	})
}

// TestShutdownWaitsThenDeadLetters: in-flight deliveries finish within the
// grace; queued jobs are dead-lettered as shutdown; intake answers
// unavailable.
func TestShutdownWaitsThenDeadLetters(t *testing.T) {
	for _, tc := range []struct {
		name      string
		grace     time.Duration
		wantEnd   time.Duration
		wantShut  int
		wantSucc  uint64
		wantCause string
	}{
		{"in-flight finishes", 10 * time.Second, 3 * time.Second, 4, 1, "shutting down"},
		{"grace runs out", 500 * time.Millisecond, 1500 * time.Millisecond, 5, 0, "cancelled at shutdown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sink := newRecSink(func(ctx context.Context, _ *queue.Job) error {
					select {
					case <-time.After(3 * time.Second):
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				})
				h := start(t, Settings{ShutdownGrace: tc.grace, Lanes: []LaneSettings{laneCfg("a", 1, 10)}},
					map[string]Sink{"a": sink})
				h.submit("a", 5)
				time.Sleep(time.Second)
				h.cancel()
				synctest.Wait()
				if rc := h.submit("a", 1)[0]; rc.Reason != ReasonUnavailable {
					t.Errorf("submit during shutdown: %+v", rc)
				}
				if err := <-h.done; err != nil {
					t.Fatal(err)
				}
				if end := time.Since(sink.t0); end != tc.wantEnd {
					t.Errorf("Run returned at %v, want %v", end, tc.wantEnd)
				}
				if got := h.dl.reasons(); got[ReasonShutdown] != tc.wantShut {
					t.Errorf("dead letters %v, want %d shutdown", got, tc.wantShut)
				}
				if dls := h.dl.list(); len(dls) == 0 || !strings.Contains(dls[0].Err, tc.wantCause) {
					t.Errorf("first dead letter %+v, want %q", dls, tc.wantCause)
				}
				st := h.status("a")
				if st.Dropped[ReasonShutdown] != uint64(tc.wantShut) || st.Delivered[OutcomeSuccess] != tc.wantSucc ||
					st.Started != 1 {
					t.Errorf("status %+v", st)
				}
				if got := testutil.ToFloat64(h.met.Vecs.Dropped.WithLabelValues("a", "shutdown")); got != float64(tc.wantShut) {
					t.Errorf("dropped{shutdown} = %v", got)
				}
				if err := h.sh.Apply(Settings{}); !errors.Is(err, ErrClosed) {
					t.Errorf("Apply after shutdown = %v", err)
				}
			})
		})
	}
}

// TestAdmission: rate_limited carries the limiter's exact RetryAfter; a
// queue_full rejection is not charged to the limiter.
func TestAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := laneCfg("a", 1, 1)
		cfg.Admission = &limiter.Config{Mode: limiter.TokenBucketMode, Rate: 0.25, Burst: 2}
		h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"a": newRecSink(nil)})
		defer h.stop()
		sub := func(key string) Receipt { return h.sh.Submit(&queue.Job{Downstream: "a", Key: key}) }
		if rc := sub("k"); !rc.Accepted {
			t.Fatalf("first: %+v", rc)
		}
		if rc := sub("k"); rc.Reason != ReasonQueueFull || rc.RetryAfter != time.Second {
			t.Fatalf("second: %+v, want queue_full after 1s", rc)
		}
		time.Sleep(time.Second) // slot frees; the token refused above was not taken
		if rc := sub("k"); !rc.Accepted {
			t.Fatalf("third: %+v (queue_full was charged?)", rc)
		}
		time.Sleep(time.Second)
		rc := sub("k")
		// 2 tokens - 1 - 1 + 2×0.25 refilled = 0.5: one more needs 2 s.
		if rc.Reason != ReasonRateLimited || rc.RetryAfter != 2*time.Second {
			t.Fatalf("fourth: %+v, want rate_limited with RetryAfter 2s", rc)
		}
		if rc := sub("other"); !rc.Accepted {
			t.Fatalf("other key: %+v", rc)
		}
		time.Sleep(time.Second)
		if rc := h.sh.Submit(&queue.Job{Downstream: "a", Key: "k", Cost: 3}); rc.Reason != ReasonBadRequest {
			t.Fatalf("cost above burst: %+v", rc)
		}
	})
}

// TestSubmitConcurrent submits from many goroutines (run with -race): every
// job is accounted for exactly once.
func TestSubmitConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sinks := map[string]Sink{"a": newRecSink(nil), "b": newRecSink(nil)}
		h := start(t, Settings{Lanes: []LaneSettings{laneCfg("a", 1000, 50), laneCfg("b", 10, 50)}}, sinks)
		var wg sync.WaitGroup
		var mu sync.Mutex
		byReason := map[Reason]int{}
		for g := range 8 {
			wg.Go(func() {
				for i := range 300 {
					name := []string{"a", "b", "c"}[(g+i)%3]
					rc := h.sh.Submit(&queue.Job{Downstream: name})
					mu.Lock()
					byReason[rc.Reason]++
					mu.Unlock()
					if i%50 == 0 {
						time.Sleep(10 * time.Millisecond)
					}
				}
			})
		}
		wg.Wait()
		h.stop()
		var accepted, rejected, dropped, delivered uint64
		for _, st := range h.sh.Lanes() {
			accepted += st.Accepted
			dropped += st.Dropped[ReasonShutdown]
			delivered += st.Delivered[OutcomeSuccess]
			for _, n := range st.Rejected {
				rejected += n
			}
		}
		if int(accepted) != byReason[""] || accepted != delivered+dropped || byReason[ReasonUnknownDownstream] != 800 ||
			int(rejected) != byReason[ReasonQueueFull] {
			t.Errorf("accepted %d delivered %d dropped %d rejected %d; receipts %v",
				accepted, delivered, dropped, rejected, byReason)
		}
	})
}

func TestMetricsLintAndSeries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Settings{Lanes: []LaneSettings{laneCfg("printer", 2, 10)}}, map[string]Sink{"printer": newRecSink(nil)})
		h.submit("printer", 12)
		h.submit("ghost", 1)
		h.met.Received("not-a-lane")
		h.met.Rejected("printer", string(ReasonPayloadTooLarge))
		time.Sleep(time.Second)
		synctest.Wait()
		h.stop()
		problems, err := testutil.GatherAndLint(h.reg)
		if err != nil || len(problems) > 0 {
			t.Fatalf("lint: %v %+v", err, problems)
		}
		for _, c := range []struct {
			c    prometheus.Collector
			want float64
		}{
			{h.met.Vecs.Received.WithLabelValues("printer"), 12},
			{h.met.Vecs.Received.WithLabelValues("_unknown"), 2},
			{h.met.Vecs.Rejected.WithLabelValues("printer", "queue_full"), 2},
			{h.met.Vecs.Rejected.WithLabelValues("printer", "payload_too_large"), 1},
			{h.met.Vecs.Rejected.WithLabelValues("_unknown", "unknown_downstream"), 1},
			{h.met.Started.WithLabelValues("printer"), 3},
			{h.met.Vecs.Dropped.WithLabelValues("printer", "shutdown"), 7},
			{h.met.Delivered.WithLabelValues("printer", "success"), 3},
			{h.met.Capacity.WithLabelValues("printer"), 10},
			{h.met.Rate.WithLabelValues("printer"), 2},
		} {
			if got := testutil.ToFloat64(c.c); got != c.want {
				t.Errorf("%v = %v, want %v", prometheus.NewDesc("x", "", nil, nil), got, c.want)
			}
		}
		// Every reason and outcome series exists before it is used.
		if n := testutil.CollectAndCount(h.met.Vecs.Rejected); n != 2*len(rejectReasons) {
			t.Errorf("%d rejected series, want %d", n, 2*len(rejectReasons))
		}
		if n := testutil.CollectAndCount(h.met.Delivered); n != len(outcomes) {
			t.Errorf("%d delivered series", n)
		}
	})
}

func TestNewValidates(t *testing.T) {
	bad := []LaneSettings{
		{Name: "", Rate: 1, Capacity: 1},
		{Name: "r", Rate: 0, Capacity: 1},
		{Name: "c", Rate: 1, Capacity: 0},
		{Name: "n", Rate: 1, Capacity: 1, Concurrency: -1},
		{Name: "b", Rate: 1, Capacity: 1, Retry: RetryPolicy{InitialBackoff: time.Minute, MaxBackoff: time.Second}},
	}
	for _, ls := range bad {
		if _, err := New(Settings{Lanes: []LaneSettings{ls}}, Deps{}); err == nil {
			t.Errorf("New accepted %+v", ls)
		}
	}
	dup := laneCfg("d", 1, 1)
	if _, err := New(Settings{Lanes: []LaneSettings{dup, dup}}, Deps{}); err == nil {
		t.Error("New accepted a duplicate lane")
	}
	if _, err := New(Settings{Lanes: []LaneSettings{laneCfg("d", 1, 1)}}, Deps{}); err == nil {
		t.Error("New accepted a NATS lane without a sink builder")
	}
}
