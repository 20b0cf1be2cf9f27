package shaper

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shaperd/shaper/limiter"
	"github.com/shaperd/shaper/queue"
)

// replay is TryReplayAt(now) of a job with id on downstream, waiting for the
// receipt.
func (h *harness) replay(downstream, id string) Receipt {
	ch := make(chan Receipt, 1)
	h.sh.TryReplay(&queue.Job{ID: id, Downstream: downstream, Payload: []byte("r")}, func(rc Receipt) { ch <- rc })
	return <-ch
}

// replayWhenFree replays a job as a replayer does: it waits out every busy
// answer and offers the same job again, and returns when it was accepted.
func (h *harness) replayWhenFree(downstream, id string) (Receipt, time.Time) {
	for {
		rc := h.replay(downstream, id)
		if !errors.Is(rc.Err, ErrBusy) {
			return rc, time.Now()
		}
		time.Sleep(rc.RetryAfter)
	}
}

// A replay into an idle lane is accepted at once, starts at once with its
// own id, counts as received and accepted, and is never charged to the
// admission rule: the lane's only token is still there for a live job.
func TestReplayIdleNotCharged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecSink(nil)
		ls := laneCfg("a", 2, 10)
		ls.Admission = &limiter.Config{Mode: limiter.TokenBucketMode, Rate: 0.001, Burst: 1}
		h := start(t, Settings{Lanes: []LaneSettings{ls}}, map[string]Sink{"a": sink})
		defer h.stop()
		rc := h.replay("a", "job-1")
		if !rc.Accepted || rc.JobID != "job-1" {
			t.Fatalf("replay into an idle lane: %+v, want accepted as job-1", rc)
		}
		time.Sleep(time.Second) // the next slot is free again
		if live := h.submit("a", 1)[0]; !live.Accepted {
			t.Fatalf("live job after a replay: %+v, want accepted (the replay took no token)", live)
		}
		if live := h.submit("a", 1)[0]; live.Accepted || live.Reason != ReasonRateLimited {
			t.Fatalf("second live job: %+v, want rate_limited (burst 1)", live)
		}
		time.Sleep(time.Second) // ... and a replay still passes the exhausted limiter
		if rc := h.replay("a", "job-2"); !rc.Accepted {
			t.Fatalf("replay with the key's tokens used up: %+v, want accepted", rc)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		tries := sink.all()
		if len(tries) != 3 || tries[0].id != "job-1" || tries[2].id != "job-2" {
			t.Fatalf("tries %+v, want job-1, a live job, job-2", tries)
		}
		wantStarts(t, sink.starts(), 0, 1, 2)
		if st := h.status("a"); st.Received != 4 || st.Accepted != 3 || st.Rejected[ReasonRateLimited] != 1 {
			t.Errorf("status %+v, want received 4, accepted 3, rate_limited 1", st)
		}
	})
}

// The busy answers: a queued live job, a slot not yet due, a pause. Each
// says how long to wait, and counts nothing.
func TestReplayBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Settings{Lanes: []LaneSettings{laneCfg("a", 2, 10)}}, map[string]Sink{"a": newRecSink(nil)})
		defer h.stop()
		h.submit("a", 3) // starts at 0, queued for 0.5 and 1
		synctest.Wait()
		rc := h.replay("a", "r")
		if rc.Accepted || !errors.Is(rc.Err, ErrBusy) || rc.Reason != "" {
			t.Fatalf("replay behind 2 queued jobs: %+v, want busy", rc)
		}
		if rc.RetryAfter != 1500*time.Millisecond { // next slot in 0.5 s, then 2 jobs × 0.5 s
			t.Errorf("RetryAfter %v behind 2 queued jobs, want 1.5s", rc.RetryAfter)
		}
		time.Sleep(1100 * time.Millisecond) // the last live job started at 1 s; next slot 1.5 s
		if rc := h.replay("a", "r"); !errors.Is(rc.Err, ErrBusy) || rc.RetryAfter != 400*time.Millisecond {
			t.Fatalf("replay before the next slot: %+v, want busy for 400ms", rc)
		}
		if err := h.sh.Pause("a"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if rc := h.replay("a", "r"); !errors.Is(rc.Err, ErrBusy) || rc.RetryAfter != 500*time.Millisecond {
			t.Fatalf("replay into a paused lane: %+v, want busy for one interval", rc)
		}
		if st := h.status("a"); st.Received != 3 || st.Accepted != 3 {
			t.Errorf("status %+v: busy answers must count nothing", st)
		}
		if rc := h.replay("nope", "r"); rc.Reason != ReasonUnknownDownstream {
			t.Errorf("replay to an unknown downstream: %+v", rc)
		}
	})
}

// Live jobs keep their pace during a replay: a backlog of live jobs starts
// exactly every 1/rate, and the replayed jobs wait until it is gone, each
// then taking a free slot, at its replayer's own pace.
func TestReplayNeverTakesALiveSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecSink(nil)
		h := start(t, Settings{Lanes: []LaneSettings{laneCfg("a", 10, 100)}}, map[string]Sink{"a": sink})
		defer h.stop()
		h.submit("a", 5) // live: 0, 0.1, 0.2, 0.3, 0.4
		done := make(chan []time.Time)
		go func() { // a replayer at 2/s
			var at []time.Time
			next := time.Now()
			for _, id := range []string{"r1", "r2", "r3"} {
				time.Sleep(time.Until(next))
				rc, t := h.replayWhenFree("a", id)
				if !rc.Accepted {
					panic(rc.Err)
				}
				at = append(at, t)
				next = t.Add(500 * time.Millisecond)
			}
			done <- at
		}()
		time.Sleep(50 * time.Millisecond)
		h.submit("a", 1) // live, arrives mid-backlog: 0.5
		<-done
		time.Sleep(time.Second)
		synctest.Wait()
		tries := sink.all()
		ids := make([]string, len(tries))
		for i, tr := range tries {
			ids[i] = tr.id
		}
		if len(ids) != 9 || ids[6] != "r1" || ids[7] != "r2" || ids[8] != "r3" {
			t.Fatalf("started %v, want the 6 live jobs, then r1..r3", ids)
		}
		// The replayer asked at 0 and waited: live slots first, r1 in the
		// first free slot (0.6), then every 0.5 s.
		wantStarts(t, sink.starts(), 0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 1.1, 1.6)
	})
}

// Replaying into a full lane waits: it is busy (never queue_full) until the
// lane is empty, and then accepted.
func TestReplayIntoFullLaneWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecSink(nil)
		h := start(t, Settings{Lanes: []LaneSettings{laneCfg("a", 4, 3)}}, map[string]Sink{"a": sink})
		defer h.stop()
		if err := h.sh.Pause("a"); err != nil {
			t.Fatal(err)
		}
		h.submit("a", 3) // full
		go func() {
			time.Sleep(2 * time.Second)
			_ = h.sh.Resume("a")
		}()
		rc, at := h.replayWhenFree("a", "r")
		if !rc.Accepted {
			t.Fatalf("replay into a full lane: %+v, want accepted once it drained", rc)
		}
		if got := at.Sub(sink.t0); got != 2750*time.Millisecond { // resumed at 2, live at 2, 2.25, 2.5
			t.Errorf("replay accepted at %v, want 2.75s", got)
		}
		synctest.Wait()
		if st := h.status("a"); st.Rejected[ReasonQueueFull] != 0 || st.Accepted != 4 {
			t.Errorf("status %+v, want 4 accepted, no queue_full", st)
		}
	})
}

// Replay waits on the lane's readiness instead of answering busy: behind a
// backlog of live jobs it is accepted in the first free slot, and into a
// paused full lane once the lane resumed and drained; a cancelled wait
// calls nothing.
func TestReplayWaitsForReadiness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecSink(nil)
		h := start(t, Settings{Lanes: []LaneSettings{laneCfg("a", 4, 3)}}, map[string]Sink{"a": sink})
		defer h.stop()
		if err := h.sh.Pause("a"); err != nil {
			t.Fatal(err)
		}
		h.submit("a", 3) // full
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		called := false
		if err := h.sh.Replay(ctx, &queue.Job{ID: "x", Downstream: "a"}, func(Receipt) { called = true }); !errors.Is(err, context.DeadlineExceeded) || called {
			t.Fatalf("Replay into a paused lane with a 1s deadline: %v (done called %v), want the deadline and no call", err, called)
		}
		cancel()
		go func() {
			time.Sleep(time.Second) // resumed at 2 s
			_ = h.sh.Resume("a")
		}()
		ch := make(chan Receipt, 1)
		if err := h.sh.Replay(t.Context(), &queue.Job{ID: "r", Downstream: "a", Payload: []byte("r")}, func(rc Receipt) { ch <- rc }); err != nil {
			t.Fatal(err)
		}
		if rc := <-ch; !rc.Accepted {
			t.Fatalf("Replay: %+v, want accepted once the lane drained", rc)
		}
		if got := time.Since(sink.t0); got != 2750*time.Millisecond { // live at 2, 2.25, 2.5
			t.Errorf("replay accepted at %v, want 2.75s", got)
		}
		synctest.Wait()
		wantStarts(t, sink.starts(), 2, 2.25, 2.5, 2.75)
		if st := h.status("a"); st.Received != 4 || st.Accepted != 4 {
			t.Errorf("status %+v: the waits must count nothing", st)
		}
	})
}
