package shaper

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shaperd/shaper/limiter"
	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/admission"
)

// fakeRemote is a remote Admitter: a keyed limiter behind a gate that
// holds every decision until released, counting the calls.
type fakeRemote struct {
	k     *limiter.Keyed
	gate  chan struct{} // nil = decide at once
	err   error
	mu    sync.Mutex
	calls int
}

func (f *fakeRemote) AllowAt(key string, now time.Time, cost int) (limiter.Decision, error) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	if f.gate != nil {
		<-f.gate
	}
	if f.err != nil {
		return limiter.Decision{}, f.err
	}
	return f.k.AllowAt(key, now, cost)
}

func (f *fakeRemote) Stats() (limiter.Stats, bool) { return limiter.Stats{}, false }
func (f *fakeRemote) Blocks() bool                 { return true }

func (f *fakeRemote) Sweep(now time.Time) int { return f.k.Sweep(now) }

func (f *fakeRemote) Refund(key string, now time.Time, cost int) { f.k.Refund(key, now, cost) }

func (f *fakeRemote) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func remoteShaper(t *testing.T, capacity int, f *fakeRemote) *Shaper {
	t.Helper()
	ls := laneCfg("erp", 1, capacity)
	ls.Admission = &limiter.Config{Mode: limiter.TokenBucketMode, Rate: 0.001, Burst: 2}
	ls.AdmissionStore = admission.Store{Kind: "nats"}
	var err error
	if f.k, err = limiter.NewKeyed(*ls.Admission); err != nil {
		t.Fatal(err)
	}
	s, err := New(Settings{Lanes: []LaneSettings{ls}}, Deps{
		Sinks:     func(LaneSettings) (Sink, error) { return newRecSink(nil), nil },
		Admitters: func(admission.Settings) (admission.Admitter, error) { return f, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A remote decision runs outside the lane's lock: while one is blocked, the
// lane still answers (status, other submissions reach their own decision).
func TestRemoteAdmissionOutsideLaneLock(t *testing.T) {
	f := &fakeRemote{gate: make(chan struct{})}
	s := remoteShaper(t, 10, f)
	var wg sync.WaitGroup
	rcs := make([]Receipt, 3)
	for i := range rcs {
		wg.Go(func() { rcs[i] = s.SubmitAt(time.Now(), &queue.Job{Downstream: "erp", Key: "acme"}) })
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.count() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 submissions reached the remote decision: the lane lock is held across it", f.count())
		}
		time.Sleep(time.Millisecond)
	}
	if st := s.Lanes(); len(st) != 1 || st[0].Depth != 0 {
		t.Fatalf("lane status while decisions are pending: %+v", st)
	}
	close(f.gate)
	wg.Wait()
	accepted := 0
	for _, rc := range rcs {
		if rc.Accepted {
			accepted++
		} else if rc.Reason != ReasonRateLimited {
			t.Fatalf("rejected %s, want rate_limited: %v", rc.Reason, rc.Err)
		}
	}
	if accepted != 2 {
		t.Fatalf("accepted %d, want the burst of 2", accepted)
	}
}

// Capacity is checked before a remote decision: a job refused as
// queue_full never reaches (and is never charged to) the store.
func TestRemoteAdmissionQueueFullNotCharged(t *testing.T) {
	f := &fakeRemote{}
	s := remoteShaper(t, 1, f)
	if rc := s.SubmitAt(time.Now(), &queue.Job{Downstream: "erp", Key: "a"}); !rc.Accepted {
		t.Fatalf("first: %+v", rc)
	}
	for i := range 5 {
		rc := s.SubmitAt(time.Now(), &queue.Job{Downstream: "erp", Key: fmt.Sprint("k", i)})
		if rc.Accepted || rc.Reason != ReasonQueueFull {
			t.Fatalf("submission %d: %+v, want queue_full", i, rc)
		}
	}
	if f.count() != 1 {
		t.Fatalf("%d remote decisions, want 1 (queue_full is decided before admission)", f.count())
	}
}

// A store that cannot decide (fail closed) rejects as unavailable with a
// Retry-After.
func TestRemoteAdmissionUnavailable(t *testing.T) {
	f := &fakeRemote{err: fmt.Errorf("kv down: %w", admission.ErrUnavailable)}
	s := remoteShaper(t, 10, f)
	rc := s.SubmitAt(time.Now(), &queue.Job{Downstream: "erp", Key: "a"})
	if rc.Accepted || rc.Reason != ReasonUnavailable || rc.RetryAfter != retryUnavailable {
		t.Fatalf("receipt %+v, want unavailable with Retry-After %s", rc, retryUnavailable)
	}
	// No Deps.Admitters for a remote store: New refuses, naming the store.
	ls := laneCfg("erp", 1, 10)
	ls.Admission = &limiter.Config{Mode: limiter.GCRAMode, Rate: 1, Burst: 1}
	ls.AdmissionStore.Kind = "nats"
	if _, err := New(Settings{Lanes: []LaneSettings{ls}}, Deps{}); err == nil {
		t.Fatal("New accepted a nats admission store without Deps.Admitters")
	}
}
