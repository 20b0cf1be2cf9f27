package test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// The seed's worked example: 15 jobs into an idle 10-slot bucket drained at
// 2/s. Exactly 10 are accepted, 5 rejected queue_full with Retry-After: 1,
// and the 10th accepted starts about 4.5 s after the first.
func TestBurst15IntoCapacity10(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(lane("printer", "2/s", 10, "", ds.URL)))

	var accepted, full int
	for i := range 15 {
		r := in.request(t, "shaper.jobs.printer", []byte(fmt.Sprintf("job-%d", i)), nil)
		switch {
		case r.Status == "accepted":
			accepted++
			if r.Position < 1 || r.JobID == "" {
				t.Errorf("job %d: accepted without position/job_id: %+v", i, r)
			}
		case r.Reason == "queue_full":
			full++
			if got := r.Header.Get("Retry-After"); got != "1" {
				t.Errorf("job %d: Retry-After %q, want 1", i, got)
			}
			if r.RetryAfter != 1 || !strings.Contains(r.Error, "full") {
				t.Errorf("job %d: rejection body %+v", i, r)
			}
		default:
			t.Errorf("job %d: unexpected reply %+v", i, r)
		}
	}
	if accepted != 10 || full != 5 {
		t.Fatalf("accepted %d, queue_full %d; want 10 and 5", accepted, full)
	}
	hits := ds.waitHits(t, 10, 15*time.Second)
	span := hits[9].at.Sub(hits[0].at)
	// 9 intervals of 500 ms; generous bounds for a busy machine, but a
	// catch-up burst (≈0) or a doubled interval (≈9 s) both fail.
	if span < 4300*time.Millisecond || span > 6*time.Second {
		t.Errorf("10th start %s after the first, want ≈4.5s", span)
	}
	for i := 1; i < len(hits); i++ {
		if gap := hits[i].at.Sub(hits[i-1].at); gap < 400*time.Millisecond {
			t.Errorf("starts %d and %d only %s apart at 2/s", i-1, i, gap)
		}
	}
	for i, h := range hits {
		if h.body != fmt.Sprintf("job-%d", i) {
			t.Errorf("hit %d body %q: not FIFO", i, h.body)
		}
		if h.jobID == "" || h.idem != h.jobID || h.attempt != 1 {
			t.Errorf("hit %d headers: job id %q, idempotency key %q, attempt %d", i, h.jobID, h.idem, h.attempt)
		}
	}
	if got := in.metric(t, `shaper_jobs_rejected_total{downstream="printer",reason="queue_full"}`); got != 5 {
		t.Errorf("rejected queue_full metric = %v, want 5", got)
	}
	if got := in.metric(t, `shaper_jobs_accepted_total{downstream="printer"}`); got != 10 {
		t.Errorf("accepted metric = %v, want 10", got)
	}
}

// After an idle period the drain does not catch up: a burst into an idle
// lane starts one job now and the rest at 1/rate intervals.
func TestIdleThenBurstNoCatchUp(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(lane("erp", "10/s", 50, "", ds.URL)))

	in.request(t, "shaper.jobs.erp", []byte("first"), nil)
	ds.waitHits(t, 1, 5*time.Second)
	time.Sleep(1500 * time.Millisecond) // idle: 15 slots pass unused
	for i := range 8 {
		if r := in.request(t, "shaper.jobs.erp", []byte(fmt.Sprint(i)), nil); r.Status != "accepted" {
			t.Fatalf("reply %+v", r)
		}
	}
	hits := ds.waitHits(t, 9, 10*time.Second)[1:]
	// Over any window W ≥ 250 ms: starts ≤ rate·W·1.1 + 1.
	const w = 250 * time.Millisecond
	for i := range hits {
		n := 0
		for j := i; j < len(hits) && hits[j].at.Sub(hits[i].at) < w; j++ {
			n++
		}
		if limit := int(10*w.Seconds()*1.1) + 1; n > limit {
			t.Fatalf("%d starts within %s of start %d; at most %d allowed at 10/s", n, w, i, limit)
		}
	}
	if span := hits[7].at.Sub(hits[0].at); span < 600*time.Millisecond {
		t.Errorf("8 starts over %s: caught up after idle", span)
	}
}

// A slow downstream lowers throughput; concurrency bounds what is in flight
// and the start rate never rises above rate.
func TestConcurrencyBoundsInflight(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	ds.delay = 400 * time.Millisecond
	in := startDaemon(t, srv, baseConfig(lane("gw", "20/s", 20, "    concurrency: 2\n", ds.URL)))
	for i := range 8 {
		in.request(t, "shaper.jobs.gw", []byte(fmt.Sprint(i)), nil)
	}
	hits := ds.waitHits(t, 8, 15*time.Second)
	ds.mu.Lock()
	maxIn := ds.maxIn
	ds.mu.Unlock()
	if maxIn > 2 {
		t.Errorf("%d deliveries in flight, concurrency is 2", maxIn)
	}
	if maxIn < 2 {
		t.Errorf("never 2 in flight; concurrency unused (max %d)", maxIn)
	}
	// 8 jobs, 2 at a time, 400 ms each: at least ~1.2 s from first to last.
	if span := hits[7].at.Sub(hits[0].at); span < 1100*time.Millisecond {
		t.Errorf("8 slow jobs started within %s with concurrency 2", span)
	}
}

// 503 with Retry-After pauses the downstream, then the job is retried; the
// pushback does not burn an attempt (max_attempts 1 still delivers it) but
// Shaper-Attempt counts the try. On both queue backends: a durable lane
// holds the pushed-back job instead of nak-ing it to the stream.
func TestPushbackPausesThenRetries(t *testing.T) {
	t.Parallel()
	for _, backend := range []struct {
		name string
		lane func(name, rate string, capacity int, extra, url string) string
	}{{"memory", lane}, {"jetstream", durableLane}} {
		t.Run(backend.name, func(t *testing.T) {
			srv := runNATS(t)
			ds := newDownstream(t)
			ds.respond = func(n int, _ *http.Request) (int, map[string]string) {
				if n == 1 {
					return http.StatusServiceUnavailable, map[string]string{"Retry-After": "2"}
				}
				return http.StatusOK, nil
			}
			in := startDaemon(t, srv, baseConfig(backend.lane("pay", "50/s", 10,
				"    retry: { max_attempts: 1 }\n    dead_letter: dl.pay\n", ds.URL)))
			dead := subscribeDead(t, in.nc, "dl.pay")
			in.request(t, "shaper.jobs.pay", []byte("a"), nil)
			in.request(t, "shaper.jobs.pay", []byte("b"), nil)
			hits := ds.waitHits(t, 3, 10*time.Second)
			if hits[1].body != "a" || hits[1].attempt != 2 || hits[1].jobID != hits[0].jobID {
				t.Errorf("retry of the pushed-back job: %+v (first %+v)", hits[1], hits[0])
			}
			if wait := hits[1].at.Sub(hits[0].at); wait < 1900*time.Millisecond || wait > 4*time.Second {
				t.Errorf("retried %s after a Retry-After of 2s", wait)
			}
			if hits[2].body != "b" {
				t.Errorf("third delivery %q, want b (the retry goes first)", hits[2].body)
			}
			select {
			case m := <-dead:
				t.Errorf("dead letter %s: the pushback burned the only attempt", m.Header.Get("Shaper-Reason"))
			default:
			}
		})
	}
}

// 5xx is retried with backoff up to max_attempts, then dead-lettered with
// reason failed and the original payload.
func TestRetriesThenDeadLetter(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	ds.respond = func(int, *http.Request) (int, map[string]string) { return http.StatusInternalServerError, nil }
	cfg := baseConfig(lane("erp", "100/s", 10,
		"    retry: { max_attempts: 3, initial_backoff: 50ms, max_backoff: 200ms }\n    dead_letter: shaper.dead.erp\n", ds.URL))
	in := startDaemon(t, srv, cfg)
	dead := subscribeDead(t, in.nc, "shaper.dead.erp")
	r := in.request(t, "shaper.jobs.erp", []byte("payload-1"), nil)
	m := recvMsg(t, dead, 10*time.Second)
	if got := m.Header.Get("Shaper-Reason"); got != "failed" {
		t.Errorf("Shaper-Reason %q, want failed", got)
	}
	if m.Header.Get("Shaper-Error") == "" || string(m.Data) != "payload-1" {
		t.Errorf("dead letter: error %q, payload %q", m.Header.Get("Shaper-Error"), m.Data)
	}
	hits := ds.snapshot()
	if len(hits) != 3 {
		t.Fatalf("downstream saw %d tries, want 3", len(hits))
	}
	for i, h := range hits {
		if h.attempt != i+1 || h.idem != r.JobID {
			t.Errorf("try %d: attempt %d, idempotency key %q (job %q)", i, h.attempt, h.idem, r.JobID)
		}
	}
	if got := in.metricReaches(t, `shaper_jobs_delivered_total{downstream="erp",outcome="dead_lettered"}`, 1); got != 1 {
		t.Errorf("dead_lettered = %v", got)
	}
}

// A permanent 4xx fails at once: no retry.
func TestPermanentFailureNoRetry(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	ds.respond = func(int, *http.Request) (int, map[string]string) { return http.StatusBadRequest, nil }
	in := startDaemon(t, srv, baseConfig(lane("erp", "100/s", 10, "    dead_letter: dl.erp\n", ds.URL)))
	dead := subscribeDead(t, in.nc, "dl.erp")
	in.request(t, "shaper.jobs.erp", []byte("x"), nil)
	m := recvMsg(t, dead, 10*time.Second)
	if m.Header.Get("Shaper-Reason") != "failed" {
		t.Errorf("reason %q", m.Header.Get("Shaper-Reason"))
	}
	if n := len(ds.snapshot()); n != 1 {
		t.Errorf("downstream saw %d tries of a 400, want 1", n)
	}
}

// A job that cannot start within its max wait is dropped as expired, never
// sent late.
func TestExpiredJobsAreDroppedNotSentLate(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(lane("printer", "1/s", 10, "    dead_letter: dl.printer\n", ds.URL)))
	dead := subscribeDead(t, in.nc, "dl.printer")
	for i := range 3 {
		r := in.request(t, "shaper.jobs.printer", []byte(fmt.Sprint(i)), map[string]string{"Shaper-Max-Wait": "300ms"})
		if r.Status != "accepted" {
			t.Fatalf("reply %+v", r)
		}
	}
	for range 2 {
		m := recvMsg(t, dead, 10*time.Second)
		if m.Header.Get("Shaper-Reason") != "expired" {
			t.Errorf("reason %q, want expired", m.Header.Get("Shaper-Reason"))
		}
	}
	time.Sleep(500 * time.Millisecond)
	if hits := ds.snapshot(); len(hits) != 1 || hits[0].body != "0" {
		t.Errorf("downstream got %d jobs; only the first could start in time", len(hits))
	}
	if got := in.metric(t, `shaper_jobs_dropped_total{downstream="printer",reason="expired"}`); got != 2 {
		t.Errorf("dropped expired = %v, want 2", got)
	}
}

// Bad input gets the documented rejection, counted; nothing crashes.
func TestIntakeRejections(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	cfg := baseConfig(lane("printer", "2/s", 10, "", ds.URL)) + "\ningress: { max_payload: 1KiB }\n"
	in := startDaemon(t, srv, cfg)
	cases := []struct {
		name    string
		subject string
		payload int
		hdr     map[string]string
		reason  string
		label   string
	}{
		{"unknown downstream", "shaper.jobs.nope", 1, nil, "unknown_downstream", "_unknown"},
		{"extra token", "shaper.jobs.printer.x", 1, nil, "unknown_downstream", "_unknown"},
		{"payload too large", "shaper.jobs.printer", 1025, nil, "payload_too_large", "printer"},
		{"max wait unparsable", "shaper.jobs.printer", 1, map[string]string{"Shaper-Max-Wait": "soon"}, "bad_request", "printer"},
		{"max wait negative", "shaper.jobs.printer", 1, map[string]string{"Shaper-Max-Wait": "-1h"}, "bad_request", "printer"},
		{"max wait zero", "shaper.jobs.printer", 1, map[string]string{"Shaper-Max-Wait": "0s"}, "bad_request", "printer"},
		{"max wait too long", "shaper.jobs.printer", 1, map[string]string{"Shaper-Max-Wait": "9999999h"}, "bad_request", "printer"},
		{"key too long", "shaper.jobs.printer", 1, map[string]string{"Shaper-Key": strings.Repeat("k", 300)}, "bad_request", "printer"},
		{"key not utf8", "shaper.jobs.printer", 1, map[string]string{"Shaper-Key": "\xff\xfe"}, "bad_request", "printer"},
	}
	want := map[string]float64{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := in.request(t, tc.subject, make([]byte, tc.payload), tc.hdr)
			if r.Status != "rejected" || r.Reason != tc.reason || r.Header.Get("Shaper-Reason") != tc.reason {
				t.Fatalf("reply %+v, want rejected %s", r, tc.reason)
			}
			if r.Error == "" {
				t.Error("rejection without an error text")
			}
			if r.Header.Get("Retry-After") != "" {
				t.Errorf("Retry-After on %s: a retry cannot help", tc.reason)
			}
		})
		want[fmt.Sprintf(`shaper_jobs_rejected_total{downstream=%q,reason=%q}`, tc.label, tc.reason)]++
	}
	for series, n := range want {
		if got := in.metric(t, series); got != n {
			t.Errorf("%s = %v, want %v", series, got, n)
		}
	}
	if len(ds.snapshot()) != 0 {
		t.Error("a rejected job reached the downstream")
	}
}

// A repeated Nats-Msg-Id within the window is accepted once; the second
// reply is accepted with duplicate:true and the original job id.
func TestDedupeByMsgID(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(lane("printer", "50/s", 10, "", ds.URL)))
	h := map[string]string{"Nats-Msg-Id": "order-42"}
	first := in.request(t, "shaper.jobs.printer", []byte("x"), h)
	second := in.request(t, "shaper.jobs.printer", []byte("x"), h)
	if first.Status != "accepted" || first.Duplicate {
		t.Fatalf("first %+v", first)
	}
	if second.Status != "accepted" || !second.Duplicate || second.JobID != first.JobID {
		t.Fatalf("second %+v, want duplicate of %s", second, first.JobID)
	}
	ds.waitHits(t, 1, 5*time.Second)
	time.Sleep(300 * time.Millisecond)
	if n := len(ds.snapshot()); n != 1 {
		t.Errorf("downstream saw %d deliveries of one msg id", n)
	}
}

// A plain publish (no reply subject) that is rejected is dead-lettered with
// the intake reason when the downstream has a dead-letter subject.
func TestPlainPublishRejectionDeadLettered(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	ds.delay = time.Second
	in := startDaemon(t, srv, baseConfig(lane("printer", "1/s", 1, "    dead_letter: dl.printer\n", ds.URL)))
	dead := subscribeDead(t, in.nc, "dl.printer")
	for i := range 4 {
		if err := in.nc.Publish("shaper.jobs.printer", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	m := recvMsg(t, dead, 5*time.Second)
	if m.Header.Get("Shaper-Reason") != "queue_full" {
		t.Errorf("reason %q, want queue_full", m.Header.Get("Shaper-Reason"))
	}
}

// Concurrent producers: every request gets exactly one answer and the
// counts add up.
func TestConcurrentProducersAccounting(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(lane("printer", "1000/s", 100, "", ds.URL)))
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[string]int{}
	for p := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				r := in.request(t, "shaper.jobs.printer", []byte(fmt.Sprintf("%d-%d", p, i)), nil)
				mu.Lock()
				counts[r.Status+"/"+r.Reason]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	accepted := counts["accepted/"]
	if accepted+counts["rejected/queue_full"] != 400 {
		t.Fatalf("answers %v do not add up to 400", counts)
	}
	ds.waitHits(t, accepted, 20*time.Second)
	if got := in.metric(t, `shaper_jobs_received_total{downstream="printer"}`); got != 400 {
		t.Errorf("received = %v, want 400", got)
	}
}
