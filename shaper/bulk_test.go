package shaper

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shaperd/shaper/limiter"
	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/admission"
)

func bulkJobs(downstream, key string, n int) []*queue.Job {
	jobs := make([]*queue.Job, n)
	for i := range jobs {
		jobs[i] = &queue.Job{Downstream: downstream, Key: key, Payload: fmt.Appendf(nil, "%s-%d", key, i)}
	}
	return jobs
}

func submitAll(sh *Shaper, jobs []*queue.Job) []Receipt {
	ch := make(chan []Receipt, 1)
	sh.SubmitAll(jobs, func(rcs []Receipt) { ch <- rcs })
	return <-ch
}

// An all-or-nothing request on a memory queue: one job over the key's
// admission limit or the queue's capacity refuses every job, queues none
// and keeps no admission token; the request that fits is queued whole, in
// order. Every job is counted in the single-job series.
func TestSubmitAllIsAllOrNothing(t *testing.T) {
	t.Parallel()
	cfg := laneCfg("a", 0.001, 6)
	cfg.Admission = &limiter.Config{Mode: limiter.TokenBucketMode, Rate: 0.001, Burst: 4}
	h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"a": newRecSink(nil)})
	defer h.stop()
	if err := h.sh.Pause("a"); err != nil {
		t.Fatal(err)
	}

	// Key k may have 4: the 5th job of the request is rate_limited, so none goes.
	rcs := submitAll(h.sh, bulkJobs("a", "k", 5))
	for i, rc := range rcs {
		if rc.Accepted || rc.Reason != ReasonRateLimited || rc.RetryAfter <= 0 {
			t.Errorf("job %d: %+v, want rate_limited with a Retry-After", i, rc)
		}
	}
	if !strings.Contains(rcs[0].Err.Error(), "job 4 of this all-or-nothing request was rejected (rate_limited)") {
		t.Errorf("job 0's error %q does not name job 4", rcs[0].Err)
	}
	if n := h.status("a").Depth; n != 0 {
		t.Fatalf("%d jobs queued after a refused request", n)
	}

	// No token was kept: 4 of key k fit now, in order.
	rcs = submitAll(h.sh, bulkJobs("a", "k", 4))
	for i, rc := range rcs {
		if !rc.Accepted || rc.Position != i+1 || rc.JobID == "" {
			t.Errorf("job %d: %+v, want accepted at position %d", i, rc, i+1)
		}
	}

	// Two slots are left: a request of three is refused as queue_full,
	// and the queue keeps its four.
	rcs = submitAll(h.sh, bulkJobs("a", "other", 3))
	for i, rc := range rcs {
		if rc.Accepted || rc.Reason != ReasonQueueFull {
			t.Errorf("job %d: %+v, want queue_full", i, rc)
		}
	}
	if n := h.status("a").Depth; n != 4 {
		t.Fatalf("%d jobs queued, want the 4 of before", n)
	}
	rcs = submitAll(h.sh, bulkJobs("a", "other", 2))
	if !rcs[0].Accepted || !rcs[1].Accepted {
		t.Fatalf("a request that fits: %+v", rcs)
	}
	st := h.status("a")
	if st.Depth != 6 || st.Received != 14 || st.Accepted != 6 || st.Rejected[ReasonRateLimited] != 5 || st.Rejected[ReasonQueueFull] != 3 {
		t.Errorf("status: queued %d received %d accepted %d rejected %v", st.Depth, st.Received, st.Accepted, st.Rejected)
	}
}

// SubmitEach takes each job as if alone: one refusal does not stop the
// next, and the accepted ones are queued in order.
func TestSubmitEachTakesEachJobAlone(t *testing.T) {
	t.Parallel()
	cfg := laneCfg("a", 0.001, 10)
	cfg.Admission = &limiter.Config{Mode: limiter.TokenBucketMode, Rate: 0.001, Burst: 2}
	h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"a": newRecSink(nil)})
	defer h.stop()
	if err := h.sh.Pause("a"); err != nil {
		t.Fatal(err)
	}
	jobs := append(bulkJobs("a", "k", 3), bulkJobs("a", "j", 2)...)
	rcs := make([]Receipt, len(jobs))
	h.sh.SubmitEach(jobs, func(i int, rc Receipt) { rcs[i] = rc })
	var got []string
	for _, rc := range rcs {
		if rc.Accepted {
			got = append(got, fmt.Sprint(rc.Position))
		} else {
			got = append(got, string(rc.Reason))
		}
	}
	if fmt.Sprint(got) != "[1 2 rate_limited 3 4]" {
		t.Errorf("receipts %v, want [1 2 rate_limited 3 4]", got)
	}
}

// With an admission rule whose decisions do I/O (a shared store), an
// all-or-nothing request asks for every job first, off the lane's lock,
// and gives every charge back when one job is refused; SubmitEach keeps
// the request's order.
func TestSubmitAllWithARemoteRule(t *testing.T) {
	t.Parallel()
	cfg := laneCfg("erp", 0.001, 100)
	cfg.Admission = &limiter.Config{Mode: limiter.TokenBucketMode, Rate: 0.001, Burst: 4}
	cfg.AdmissionStore = admission.Store{Kind: "nats"}
	f := &fakeRemote{}
	var err error
	if f.k, err = limiter.NewKeyed(*cfg.Admission); err != nil {
		t.Fatal(err)
	}
	sh, err := New(Settings{Lanes: []LaneSettings{cfg}}, Deps{
		Sinks:     func(LaneSettings) (Sink, error) { return newRecSink(nil), nil },
		Admitters: func(admission.Settings) (admission.Admitter, error) { return f, nil },
		Metrics:   NewMetrics(prometheus.NewRegistry()),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sh.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	<-sh.Ready()
	if err := sh.Pause("erp"); err != nil {
		t.Fatal(err)
	}
	rcs := submitAll(sh, bulkJobs("erp", "k", 5))
	if rcs[4].Reason != ReasonRateLimited || rcs[0].Reason != ReasonRateLimited || f.count() != 5 {
		t.Fatalf("receipts %+v after %d decisions, want all rate_limited after 5", rcs, f.count())
	}
	// The refunds run on the Shaper's goroutines: the key's 4 come back.
	deadline := time.Now().Add(10 * time.Second)
	for {
		rcs = submitAll(sh, bulkJobs("erp", "k", 4))
		if rcs[0].Accepted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the charges of a refused request were not given back: %+v", rcs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i, rc := range rcs {
		if !rc.Accepted || rc.Position != i+1 {
			t.Errorf("job %d: %+v, want accepted at position %d", i, rc, i+1)
		}
	}
	got := make(chan string, 3)
	sh.SubmitEach(bulkJobs("erp", "j", 3), func(i int, rc Receipt) { got <- fmt.Sprint(i, ":", rc.Position) })
	var order []string
	for range 3 {
		order = append(order, <-got)
	}
	if fmt.Sprint(order) != "[0:5 1:6 2:7]" {
		t.Errorf("SubmitEach on a remote rule: %v, want [0:5 1:6 2:7]", order)
	}
}
