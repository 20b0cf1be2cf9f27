package shaper

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/shaperd/shaper/queue"
)

// TestWouldExpire: with RejectWouldExpire a job whose predicted start is
// past its max wait is rejected at once with an honest Retry-After, and the
// jobs accepted all start within their max wait (none expires).
func TestWouldExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecSink(nil)
		cfg := laneCfg("a", 10, 100) // 100 ms per start
		cfg.MaxWait = time.Second
		cfg.RejectWouldExpire = true
		h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"a": sink})
		defer h.stop()
		rcs := h.submit("a", 15)
		for i, rc := range rcs[:10] { // starts at 0, 0.1, ..., 0.9: within 1s with 20 ms to spare
			if !rc.Accepted {
				t.Fatalf("job %d: %+v, want accepted", i+1, rc)
			}
		}
		// The 11th would start at exactly 1.0 s: inside the scheduler's
		// 20 ms lateness budget of its deadline, so refused; rejected jobs
		// hold no place, so each of the rest is predicted at 1.0 s too.
		for i, rc := range rcs[10:] {
			want := 20 * time.Millisecond // 1.0 s + 20 ms margin − 1 s deadline
			if rc.Accepted || rc.Reason != ReasonWouldExpire || rc.RetryAfter != want {
				t.Fatalf("job %d: %+v, want would_expire with Retry-After %v", i+11, rc, want)
			}
		}
		// A shorter per-job max wait is honoured too.
		if rc := h.sh.Submit(&queue.Job{Downstream: "a", MaxWait: 500 * time.Millisecond}); rc.Accepted || rc.Reason != ReasonWouldExpire {
			t.Fatalf("job with max wait 500ms behind 11: %+v", rc)
		}
		time.Sleep(20 * time.Millisecond) // the Retry-After of the first rejected job
		if rc := h.sh.Submit(&queue.Job{Downstream: "a"}); !rc.Accepted {
			t.Fatalf("retry after Retry-After: %+v, want accepted", rc)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		st := h.status("a")
		if st.Dropped[ReasonExpired] != 0 || st.Rejected[ReasonWouldExpire] != 6 || st.Delivered[OutcomeSuccess] != 11 {
			t.Errorf("status: dropped %v rejected %v delivered %v", st.Dropped, st.Rejected, st.Delivered)
		}
	})
}

// TestWouldExpireOffByDefault: without RejectWouldExpire such jobs are
// accepted and dropped later as expired (the documented behaviour).
func TestWouldExpireOffByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := laneCfg("a", 10, 100)
		cfg.MaxWait = time.Second
		h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"a": newRecSink(nil)})
		defer h.stop()
		for _, rc := range h.submit("a", 15) {
			if !rc.Accepted {
				t.Fatalf("%+v, want accepted", rc)
			}
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if st := h.status("a"); st.Dropped[ReasonExpired] != 4 {
			t.Errorf("dropped %v, want 4 expired", st.Dropped)
		}
	})
}
