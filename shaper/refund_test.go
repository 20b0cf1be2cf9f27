package shaper

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shaperd/shaper/limiter"
	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/admission"
)

// failingStore is a durable queue kind (its store answers later) whose
// store fails every Offer while down is set: a JetStream that is away.
type failingStore struct {
	*queue.Bucket
	down atomic.Bool
}

func (q *failingStore) Offer(job *queue.Job, at time.Time) queue.Stored {
	return queue.Later(func(done func(queue.Placed, error)) {
		if q.down.Load() {
			done(queue.Placed{}, errors.New("nats: no responders available for request"))
			return
		}
		q.Bucket.Offer(job, at).Then(done)
	})
}

// TestStoreFailureRefundsAdmission: a key limited to 2 jobs (burst 2, no
// refill to speak of) retries 5 times while the queue's store fails: every
// try is refused unavailable, never rate_limited, because each failed
// store gives the admission charge back; once the store is back the key
// is admitted twice, then limited. The same with the rule in this
// process and in a remote store (whose refunds run on their own
// goroutine).
func TestStoreFailureRefundsAdmission(t *testing.T) {
	for _, remote := range []bool{false, true} {
		name := map[bool]string{false: "memory", true: "remote"}[remote]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := laneCfg("a", 10, 100)
				cfg.Durable = true
				cfg.Admission = &limiter.Config{Mode: limiter.TokenBucketMode, Rate: 0.001, Burst: 2}
				deps := Deps{Metrics: NewMetrics(prometheus.NewRegistry())}
				if remote {
					cfg.AdmissionStore = admission.Store{Kind: "nats"}
					f := &fakeRemote{}
					var err error
					if f.k, err = limiter.NewKeyed(*cfg.Admission); err != nil {
						t.Fatal(err)
					}
					deps.Admitters = func(admission.Settings) (admission.Admitter, error) { return f, nil }
				}
				q := &failingStore{Bucket: queue.NewBucket(queueSettings(cfg))}
				q.down.Store(true)
				deps.Queues = func(LaneSettings) (queue.Roles, error) { return queue.Roles{Queue: q, Memory: q}, nil }
				sink := newRecSink(nil)
				deps.Sinks = func(LaneSettings) (Sink, error) { return sink, nil }
				sh, err := New(Settings{Lanes: []LaneSettings{cfg}}, deps)
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
				submit := func() Receipt {
					ch := make(chan Receipt, 1)
					sh.SubmitFunc(&queue.Job{Downstream: "a", Key: "acme"}, func(rc Receipt) { ch <- rc })
					rc := <-ch
					synctest.Wait() // a remote refund has run
					return rc
				}
				for i := range 5 {
					if rc := submit(); rc.Accepted || rc.Reason != ReasonUnavailable {
						t.Fatalf("try %d while the store fails: %+v, want unavailable", i, rc)
					}
				}
				if n := testutil.ToFloat64(deps.Metrics.Refunds.WithLabelValues("a")); n != 5 {
					t.Errorf("shaper_admission_refunds_total = %v, want 5", n)
				}
				q.down.Store(false)
				for i, want := range []Reason{"", "", ReasonRateLimited} {
					if rc := submit(); rc.Reason != want || rc.Accepted != (want == "") {
						t.Errorf("try %d after the store is back: %+v, want reason %q", i, rc, want)
					}
				}
			})
		})
	}
}
