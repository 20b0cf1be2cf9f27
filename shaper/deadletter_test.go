package shaper

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/metrics"
	"github.com/shaperd/shaper/shaper/policy"
)

// flakyDL refuses the first `fails` dead letters (every one when fails < 0),
// recording when each try came.
type flakyDL struct {
	t0    time.Time
	mu    sync.Mutex
	fails int
	tries []time.Duration
	taken []DeadLetter
}

func (d *flakyDL) DeadLetter(_ context.Context, dl DeadLetter) (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tries = append(d.tries, time.Since(d.t0))
	if d.fails != 0 {
		d.fails--
		return 0, errors.New("store unavailable")
	}
	d.taken = append(d.taken, dl)
	return uint64(len(d.taken)), nil
}

func (d *flakyDL) snapshot() ([]time.Duration, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]time.Duration(nil), d.tries...), len(d.taken)
}

// keepQueue is a memory queue that plays queue.Settler: it records GiveUp
// and answers Keep as a durable kind (keeps = true) or a memory one would.
type keepQueue struct {
	*queue.Bucket
	keeps bool

	mu    sync.Mutex
	given []time.Duration // when GiveUp came, since t0
	kept  int
	t0    time.Time
}

func (q *keepQueue) Ack(*queue.Job, time.Time) {}

func (q *keepQueue) GiveUp(*queue.Job) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.given = append(q.given, time.Since(q.t0))
}

func (q *keepQueue) Keep(*queue.Job) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.kept++
	return q.keeps
}

func (q *keepQueue) snapshot() ([]time.Duration, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]time.Duration(nil), q.given...), q.kept
}

type dlHarness struct {
	sh     *Shaper
	met    *metrics.Metrics
	q      *keepQueue
	dl     *flakyDL
	cancel context.CancelFunc
	done   chan error
}

// startDL runs one lane "a" whose sink always fails permanently, on a
// keepQueue, dead-lettering into a flakyDL.
func startDL(t *testing.T, fails int, keeps bool, grace time.Duration) *dlHarness {
	t.Helper()
	cfg := laneCfg("a", 10, 10)
	cfg.Durable = true
	h := &dlHarness{met: NewMetrics(prometheus.NewRegistry()), dl: &flakyDL{t0: time.Now(), fails: fails},
		done: make(chan error, 1)}
	h.q = &keepQueue{Bucket: queue.NewBucket(queueSettings(cfg)), keeps: keeps, t0: time.Now()}
	sink := newRecSink(func(context.Context, *queue.Job) error { return &policy.PermanentError{Err: errors.New("410")} })
	roles := queue.Roles{Queue: h.q, Memory: h.q, Settler: h.q}
	sh, err := New(Settings{ShutdownGrace: grace, Lanes: []LaneSettings{cfg}}, Deps{
		Sinks:      func(LaneSettings) (Sink, error) { return sink, nil },
		Queues:     func(LaneSettings) (queue.Roles, error) { return roles, nil },
		DeadLetter: h.dl, Metrics: h.met,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.sh = sh
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- sh.Run(ctx) }()
	<-sh.Ready()
	return h
}

func (h *dlHarness) counter(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }

// A refused dead letter is tried again after 1 s, 2 s, 4 s ... and the job
// is given up (a durable one deleted) only once the store took it; the
// outcome is dead_lettered only then, and the lane goes on meanwhile.
func TestDeadLetterRetriedUntilStored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startDL(t, 3, true, time.Second)
		h.sh.Submit(&queue.Job{Downstream: "a", ID: "j1"})
		time.Sleep(3500 * time.Millisecond)
		synctest.Wait()
		tries, taken := h.dl.snapshot()
		given, _ := h.q.snapshot()
		if len(tries) != 3 || taken != 0 || len(given) != 0 {
			t.Fatalf("at 3.5 s: tries %v, taken %d, given up %v; want 3 refused tries and the job still queued", tries, taken, given)
		}
		if got := h.counter(h.met.DLStoreErrors.WithLabelValues("a")); got != 3 {
			t.Errorf("store errors = %v, want 3", got)
		}
		if st := h.sh.Lanes()[0]; st.Delivered[OutcomeDeadLettered] != 0 || st.Delivered[OutcomeFailed] != 0 {
			t.Errorf("outcome booked before the dead letter was stored: %+v", st.Delivered)
		}
		// The lane is not blocked: another job is tried at once, and its
		// dead letter waits behind the first (same downstream, in order).
		h.sh.Submit(&queue.Job{Downstream: "a", ID: "j2"})
		time.Sleep(4 * time.Second)
		synctest.Wait()
		tries, taken = h.dl.snapshot()
		given, _ = h.q.snapshot()
		want := []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second, 7 * time.Second}
		if len(tries) != len(want) || taken != 2 || len(given) != 2 {
			t.Fatalf("tries %v (want %v), taken %d, given up %v", tries, want, taken, given)
		}
		for i := range want {
			if tries[i].Truncate(100*time.Millisecond) != want[i] {
				t.Fatalf("tries at %v, want %v", tries, want)
			}
		}
		if given[0] < 7*time.Second {
			t.Errorf("job given up at %v, before its dead letter was stored at 7 s", given[0])
		}
		if st := h.sh.Lanes()[0]; st.Delivered[OutcomeDeadLettered] != 2 || st.Delivered[OutcomeFailed] != 0 {
			t.Errorf("outcomes %+v, want 2 dead_lettered", st.Delivered)
		}
		h.cancel()
		if err := <-h.done; err != nil {
			t.Fatal(err)
		}
	})
}

// At shutdown the worker keeps trying within the grace; then a durable job
// is kept in its stream (not given up, nothing lost), a memory job is lost
// and counted in shaper_dead_letters_lost_total, its outcome failed.
func TestDeadLetterUnstoredAtShutdown(t *testing.T) {
	for _, tc := range []struct {
		name       string
		keeps      bool
		lost, fail float64
	}{
		{"durable job stays in its stream", true, 0, 0},
		{"memory job is lost and counted", false, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := startDL(t, -1, tc.keeps, 5*time.Second)
				h.sh.Submit(&queue.Job{Downstream: "a", ID: "j1"})
				time.Sleep(1500 * time.Millisecond)
				h.cancel()
				if err := <-h.done; err != nil {
					t.Fatal(err)
				}
				tries, taken := h.dl.snapshot()
				given, kept := h.q.snapshot()
				// 0, 1 s, 3 s; the next (7 s) is past the grace (1.5 + 5 s)
				if len(tries) != 3 || taken != 0 || len(given) != 0 || kept != 1 {
					t.Fatalf("tries %v, taken %d, given up %v, kept %d", tries, taken, given, kept)
				}
				if got := h.counter(h.met.DLLost.WithLabelValues("a")); got != tc.lost {
					t.Errorf("lost = %v, want %v", got, tc.lost)
				}
				if got := h.counter(h.met.Delivered.WithLabelValues("a", string(OutcomeFailed))); got != tc.fail {
					t.Errorf("delivered{failed} = %v, want %v", got, tc.fail)
				}
				if got := h.counter(h.met.Delivered.WithLabelValues("a", string(OutcomeDeadLettered))); got != 0 {
					t.Errorf("delivered{dead_lettered} = %v, want 0", got)
				}
			})
		})
	}
}
