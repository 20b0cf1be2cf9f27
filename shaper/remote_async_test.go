package shaper

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shaperd/shaper/limiter"
	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/admission"
)

// blockingAdmitter admits everything, but each decision waits for release:
// an admission store that is slow or hanging.
type blockingAdmitter struct {
	release chan struct{}
	mu      sync.Mutex
	calls   int
}

func (a *blockingAdmitter) AllowAt(string, time.Time, int) (limiter.Decision, error) {
	a.mu.Lock()
	a.calls++
	a.mu.Unlock()
	<-a.release
	return limiter.Decision{Allowed: true}, nil
}

func (a *blockingAdmitter) Sweep(time.Time) int           { return 0 }
func (a *blockingAdmitter) Refund(string, time.Time, int) {}
func (a *blockingAdmitter) Stats() (limiter.Stats, bool)  { return limiter.Stats{}, false }
func (a *blockingAdmitter) Blocks() bool                  { return true }

// A lane whose admission store hangs holds up neither the caller nor any
// other lane; its jobs are answered when the store answers, and shutdown
// waits for those answers.
func TestRemoteAdmissionDoesNotBlockCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		adm := &blockingAdmitter{release: make(chan struct{})}
		remote := laneCfg("remote", 100, 10)
		remote.Admission = &limiter.Config{Mode: limiter.TokenBucketMode, Rate: 10, Burst: 10}
		remote.AdmissionStore = admission.Store{Kind: "nats"}
		local := laneCfg("local", 100, 10)
		sink := newRecSink(nil)
		sh, err := New(Settings{Lanes: []LaneSettings{remote, local}, ShutdownGrace: time.Second}, Deps{
			Sinks:     func(LaneSettings) (Sink, error) { return sink, nil },
			Admitters: func(admission.Settings) (admission.Admitter, error) { return adm, nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- sh.Run(ctx) }()
		<-sh.Ready()

		var mu sync.Mutex
		var answers []Receipt
		answer := func(rc Receipt) { mu.Lock(); answers = append(answers, rc); mu.Unlock() }
		for range 3 {
			sh.SubmitFunc(&queue.Job{Downstream: "remote", Payload: []byte("r")}, answer)
		}
		sh.SubmitFunc(&queue.Job{Downstream: "local", Payload: []byte("l")}, answer)
		synctest.Wait()
		mu.Lock()
		if len(answers) != 1 || answers[0].Downstream != "local" || !answers[0].Accepted {
			t.Fatalf("answers while the store hangs: %+v; want only local, accepted", answers)
		}
		mu.Unlock()
		adm.mu.Lock()
		if adm.calls != 3 {
			t.Errorf("%d decisions in flight, want 3 (concurrently, not one at a time)", adm.calls)
		}
		adm.mu.Unlock()

		cancel() // shutdown must wait for the three pending decisions
		time.Sleep(100 * time.Millisecond)
		select {
		case <-done:
			t.Fatal("Run returned while admission decisions were still pending")
		default:
		}
		close(adm.release)
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(answers) != 4 {
			t.Errorf("%d answers, want 4: every submission answered exactly once", len(answers))
		}
	})
}

// Past maxRemoteDecisions in flight, a job is refused unavailable with a
// Retry-After instead of piling up behind the store.
func TestRemoteAdmissionBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		adm := &blockingAdmitter{release: make(chan struct{})}
		remote := laneCfg("remote", 100, 10)
		remote.Admission = &limiter.Config{Mode: limiter.TokenBucketMode, Rate: 10, Burst: 10}
		remote.AdmissionStore = admission.Store{Kind: "nats"}
		sh, err := New(Settings{Lanes: []LaneSettings{remote}}, Deps{
			Sinks:     func(LaneSettings) (Sink, error) { return newRecSink(nil), nil },
			Admitters: func(admission.Settings) (admission.Admitter, error) { return adm, nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- sh.Run(ctx) }()
		<-sh.Ready()
		var busy []Receipt
		var mu sync.Mutex
		for range maxRemoteDecisions + 5 {
			sh.SubmitFunc(&queue.Job{Downstream: "remote"}, func(rc Receipt) {
				if rc.Reason == ReasonUnavailable {
					mu.Lock()
					busy = append(busy, rc)
					mu.Unlock()
				}
			})
		}
		synctest.Wait()
		mu.Lock()
		if len(busy) != 5 || busy[0].RetryAfter != busyRetryAfter {
			t.Errorf("%d refused busy (want 5), first %+v", len(busy), busy)
		}
		mu.Unlock()
		close(adm.release)
		cancel()
		<-done
	})
}
