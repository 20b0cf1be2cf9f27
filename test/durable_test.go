package test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// durableLane renders one downstream's YAML block with the jetstream backend.
func durableLane(name, rate string, capacity int, extra, url string) string {
	return fmt.Sprintf(`
  %s:
    rate: %s
    queue: { capacity: %d, backend: jetstream }
    sink:
      http: { url: %q, timeout: 2s }
%s`, name, rate, capacity, url, extra)
}

// streamMsgs returns how many jobs the downstream's stream holds.
func streamMsgs(t *testing.T, nc *nats.Conn, downstream string) uint64 {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "SHAPER_"+downstream)
	if err != nil {
		t.Fatalf("stream of %s: %v", downstream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// The durable queue holds exactly capacity jobs (the stream's bound),
// replies accepted only once stored, and drains them at the rate.
func TestDurableBurstAndPace(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(durableLane("printer", "10/s", 10, "", ds.URL)))
	_ = in.do(t, http.MethodPost, "/v1/downstreams/printer/pause", http.StatusOK)
	accepted, full := 0, 0
	for i := range 15 {
		r := in.request(t, "shaper.jobs.printer", []byte(fmt.Sprint(i)), nil)
		switch {
		case r.Status == "accepted":
			accepted++
			if r.Position < 1 {
				t.Errorf("accepted with position %d", r.Position)
			}
		case r.Reason == "queue_full":
			full++ // no Retry-After: the lane is paused, so no slot is due
		default:
			t.Fatalf("unexpected reply %+v", r)
		}
	}
	if accepted != 10 || full != 5 {
		t.Fatalf("accepted %d, queue_full %d; want 10 and 5", accepted, full)
	}
	if n := streamMsgs(t, in.nc, "printer"); n != 10 {
		t.Fatalf("stream holds %d jobs, want 10", n)
	}
	_ = in.do(t, http.MethodPost, "/v1/downstreams/printer/resume", http.StatusOK)
	hits := ds.waitHits(t, 10, 10*time.Second)
	for i := 1; i < len(hits); i++ {
		if gap := hits[i].at.Sub(hits[i-1].at); gap < 80*time.Millisecond {
			t.Errorf("start %d only %s after the previous one at 10/s", i, gap)
		}
	}
	waitFor(t, 5*time.Second, func() bool { return streamMsgs(t, in.nc, "printer") == 0 }, "stream empty after acks")
}

// Jobs queued at shutdown stay in the stream (no shutdown dead letters),
// the pause stays with them, and the next daemon delivers them once resumed.
func TestDurableSurvivesRestart(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	conf := baseConfig(durableLane("printer", "20/s", 100, "    dead_letter: dl.printer\n", ds.URL))
	in := startDaemon(t, srv, conf)
	dead := subscribeDead(t, in.nc, "dl.printer")
	_ = in.do(t, http.MethodPost, "/v1/downstreams/printer/pause", http.StatusOK)
	for i := range 20 {
		if r := in.request(t, "shaper.jobs.printer", []byte(fmt.Sprint(i)), nil); r.Status != "accepted" {
			t.Fatalf("job %d: %+v", i, r)
		}
	}
	in.stop(t)
	select {
	case m := <-dead:
		t.Fatalf("dead letter at shutdown of a durable queue: %s", m.Header.Get("Shaper-Reason"))
	case <-time.After(200 * time.Millisecond):
	}
	if len(ds.snapshot()) != 0 {
		t.Fatal("paused lane delivered")
	}
	// The pause is kept in NATS with the queue: the next daemon holds the
	// jobs until resumed.
	in = startDaemon(t, srv, conf)
	if r, _ := rowOf(in.admin, "printer"); !r.Paused {
		t.Errorf("the pause of a jetstream downstream did not survive the restart: %+v", r)
	}
	_ = in.do(t, http.MethodPost, "/v1/downstreams/printer/resume", http.StatusOK)
	hits := ds.waitHits(t, 20, 10*time.Second)
	seen := map[string]bool{}
	for _, h := range hits {
		seen[h.body] = true
	}
	if len(seen) != 20 {
		t.Fatalf("%d distinct jobs delivered after restart, want 20", len(seen))
	}
}

// A job that always fails ends in the dead letter after max_attempts, with
// backoff waits in the stream, and is then deleted (never loops).
func TestDurablePoisonJobDeadLettered(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	ds.respond = func(int, *http.Request) (int, map[string]string) { return http.StatusInternalServerError, nil }
	in := startDaemon(t, srv, baseConfig(durableLane("printer", "50/s", 10,
		"    retry: { max_attempts: 3, initial_backoff: 50ms, max_backoff: 100ms }\n    dead_letter: dl.printer\n", ds.URL)))
	dead := subscribeDead(t, in.nc, "dl.printer")
	if r := in.request(t, "shaper.jobs.printer", []byte("poison"), nil); r.Status != "accepted" {
		t.Fatalf("%+v", r)
	}
	m := recvMsg(t, dead, 10*time.Second)
	if m.Header.Get("Shaper-Reason") != "failed" || string(m.Data) != "poison" {
		t.Fatalf("dead letter %q %v", m.Data, m.Header)
	}
	hits := ds.snapshot()
	if len(hits) != 3 {
		t.Fatalf("%d tries, want 3 (max_attempts)", len(hits))
	}
	for i, h := range hits {
		if h.attempt != i+1 {
			t.Errorf("try %d has Shaper-Attempt %d", i+1, h.attempt)
		}
	}
	waitFor(t, 5*time.Second, func() bool { return streamMsgs(t, in.nc, "printer") == 0 }, "poison job deleted from the stream")
	time.Sleep(300 * time.Millisecond)
	if n := len(ds.snapshot()); n != 3 {
		t.Fatalf("%d tries after dead letter, want 3", n)
	}
}

// An expired job on a durable queue is dead-lettered and never sent.
func TestDurableExpiredNeverSent(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(durableLane("printer", "20/s", 10, "    dead_letter: dl.printer\n", ds.URL)))
	dead := subscribeDead(t, in.nc, "dl.printer")
	_ = in.do(t, http.MethodPost, "/v1/downstreams/printer/pause", http.StatusOK)
	if r := in.request(t, "shaper.jobs.printer", []byte("late"), map[string]string{"Shaper-Max-Wait": "200ms"}); r.Status != "accepted" {
		t.Fatalf("%+v", r)
	}
	time.Sleep(400 * time.Millisecond)
	_ = in.do(t, http.MethodPost, "/v1/downstreams/printer/resume", http.StatusOK)
	m := recvMsg(t, dead, 5*time.Second)
	if m.Header.Get("Shaper-Reason") != "expired" {
		t.Fatalf("reason %q", m.Header.Get("Shaper-Reason"))
	}
	if n := len(ds.snapshot()); n != 0 {
		t.Fatalf("expired job was sent (%d hits)", n)
	}
}

// A repeated Nats-Msg-Id is stored once, also across a restart of the
// daemon (the stream's duplicate window), and answered duplicate.
func TestDurableDedupeAcrossRestart(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	conf := baseConfig(durableLane("printer", "20/s", 10, "", ds.URL))
	in := startDaemon(t, srv, conf)
	_ = in.do(t, http.MethodPost, "/v1/downstreams/printer/pause", http.StatusOK)
	first := in.request(t, "shaper.jobs.printer", []byte("x"), map[string]string{"Nats-Msg-Id": "order-1"})
	in.stop(t)
	in2 := startDaemon(t, srv, conf)
	_ = in2.do(t, http.MethodPost, "/v1/downstreams/printer/pause", http.StatusOK)
	again := in2.request(t, "shaper.jobs.printer", []byte("x"), map[string]string{"Nats-Msg-Id": "order-1"})
	if !again.Duplicate || again.JobID != first.JobID {
		t.Fatalf("repeat after restart: %+v, first job %s", again, first.JobID)
	}
	if n := streamMsgs(t, in2.nc, "printer"); n != 1 {
		t.Fatalf("stream holds %d jobs, want 1", n)
	}
	_ = strings.TrimSpace
}

// The contract: a burst of N into an idle downstream accepts exactly min(N,
// capacity), on the durable backend too, even when the burst is spread out
// enough for the first job to be delivered in the middle of it: the
// delivered job keeps its slot in the stream until its interval ends, as it
// does in the memory queue's level. At 1/s the burst (about 0.2 s here,
// more under -race on a busy machine) stays well inside the first job's
// interval; at 2/s a slow run let the interval end mid-burst, and the 11th
// job then fitted, rightly.
func TestDurableBurstIntoIdleDownstream(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(durableLane("printer", "1/s", 10, "", ds.URL)))
	begin := time.Now()
	accepted, full := 0, 0
	for i := range 15 {
		r := in.request(t, "shaper.jobs.printer", []byte(fmt.Sprint(i)), nil)
		switch {
		case r.Status == "accepted":
			accepted++
		case r.Reason == "queue_full":
			full++
			if r.Header.Get("Retry-After") != "1" {
				t.Errorf("queue_full with Retry-After %q, want 1", r.Header.Get("Retry-After"))
			}
		default:
			t.Fatalf("unexpected reply %+v", r)
		}
		if i == 0 {
			ds.waitHits(t, 1, 5*time.Second) // the first job is delivered mid-burst
		}
		time.Sleep(10 * time.Millisecond)
	}
	burst := time.Since(begin)
	if accepted != 10 || full != 5 {
		t.Fatalf("accepted %d, queue_full %d over a %s burst; want 10 and 5", accepted, full, burst.Round(time.Millisecond))
	}
	hits := ds.waitHits(t, 10, 20*time.Second)
	if span := hits[9].at.Sub(hits[0].at); span < 8600*time.Millisecond {
		t.Errorf("10th start %s after the first at 1/s, want ≈9 s", span)
	}
	waitFor(t, 5*time.Second, func() bool { return streamMsgs(t, in.nc, "printer") == 0 }, "every held ack sent")
}

// A job sent to an idle durable downstream starts at once, not when the
// drainer's pull for more jobs than the stream holds ends (it waits up to
// 2 s at the server for its whole batch): jobs sent one at a time, each
// after the last was delivered, each start within a second of being sent,
// with a prefetch of 4 (concurrency 4).
func TestDurableLoneJobStartsPromptly(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(fmt.Sprintf(`
  erp:
    rate: 20/s
    concurrency: 4
    queue: { capacity: 100, backend: jetstream }
    sink:
      http: { url: %q, timeout: 2s }
`, ds.URL)))
	for i := range 4 {
		sent := time.Now()
		r := in.request(t, "shaper.jobs.erp", []byte(fmt.Sprint("job", i)), nil)
		if r.Status != "accepted" {
			t.Fatalf("job %d: %+v", i, r)
		}
		hits := ds.waitHits(t, i+1, 5*time.Second)
		d := hits[i].at.Sub(sent)
		t.Logf("job %d started %s after it was sent", i, d.Round(100*time.Microsecond))
		if d > time.Second {
			t.Errorf("job %d started %s after it was sent, want well under a second on an idle downstream", i, d.Round(time.Millisecond))
		}
		time.Sleep(200 * time.Millisecond) // the drainer's next pull is out
	}
}

// Expired jobs do not hold a durable queue's room while no start reaches
// them: a paused downstream full of jobs past their max_wait refuses the
// next job queue_full with Retry-After 1 while it drops them (each counted
// and dead-lettered as expired), and takes new jobs a moment later, as a
// memory queue does at once.
func TestDurableExpiredFreeRoomWhilePaused(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(fmt.Sprintf(`
  fax:
    rate: 10/s
    queue: { capacity: 5, backend: jetstream, max_wait: 1s }
    sink:
      http: { url: %q, timeout: 2s }
`, ds.URL)))
	_ = in.do(t, http.MethodPost, "/v1/downstreams/fax/pause", http.StatusOK)
	for i := range 5 {
		if r := in.request(t, "shaper.jobs.fax", []byte(fmt.Sprint("old", i)), nil); r.Status != "accepted" {
			t.Fatalf("job %d: %+v", i, r)
		}
	}
	if r := in.request(t, "shaper.jobs.fax", []byte("over"), nil); r.Reason != "queue_full" {
		t.Fatalf("a sixth job before the max wait: %+v, want queue_full", r)
	}
	time.Sleep(1500 * time.Millisecond) // past every job's max_wait
	var first *reply
	accepted := false
	for deadline := time.Now().Add(10 * time.Second); !accepted && time.Now().Before(deadline); {
		r := in.request(t, "shaper.jobs.fax", []byte("new"), nil)
		switch {
		case r.Status == "accepted":
			accepted = true
		case r.Reason == "queue_full":
			if first == nil {
				first = &r
			}
			time.Sleep(200 * time.Millisecond)
		default:
			t.Fatalf("unexpected reply %+v", r)
		}
	}
	if !accepted {
		t.Fatal("no job accepted within 10 s of the queued ones' max wait: expired jobs still hold the paused queue's room")
	}
	if first != nil && first.Header.Get("Retry-After") != "1" {
		t.Errorf("queue_full while dropping expired jobs with Retry-After %q, want 1", first.Header.Get("Retry-After"))
	}
	dead := in.waitDead(t, "fax", 5)
	for _, d := range dead {
		if d.Reason != "expired" {
			t.Errorf("dead letter %+v, want reason expired", d)
		}
	}
	if n := len(ds.snapshot()); n != 0 {
		t.Errorf("%d jobs delivered while paused", n)
	}
}
