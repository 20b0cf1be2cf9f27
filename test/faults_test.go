package test

import (
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// maxInWindow is the most hits in any window of length w.
func maxInWindow(hits []hit, w time.Duration) int {
	most := 0
	for i := range hits {
		n := 0
		for j := i; j < len(hits) && hits[j].at.Sub(hits[i].at) < w; j++ {
			n++
		}
		most = max(most, n)
	}
	return most
}

// checkPace fails if any window of 250 ms or more holds more starts than
// The pacing bound allows: rate × W × 1.1 + 1.
func checkPace(t *testing.T, hits []hit, rate float64) {
	t.Helper()
	for _, w := range []time.Duration{250 * time.Millisecond, time.Second} {
		if n, limit := maxInWindow(hits, w), int(rate*w.Seconds()*1.1)+1; n > limit {
			t.Errorf("%d starts within %s; at most %d allowed at %v/s", n, w, limit, rate)
		}
	}
}

// Half the tries fail with 500: every job is still delivered, by retries
// with backoff, and retries never push the start rate above rate.
func TestFlakyDownstreamLosesNothing(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	// Whether a try fails is a hash of (job, attempt): about half of all
	// tries fail, deterministically, and unlike "every other request" no
	// job's retries can keep landing on the failing half.
	ds.respond = func(_ int, r *http.Request) (int, map[string]string) {
		if failTry(r.Header.Get("Shaper-Job-Id"), r.Header.Get("Shaper-Attempt")) {
			return http.StatusInternalServerError, nil
		}
		return http.StatusOK, nil
	}
	// The breaker is off: this measures retries alone. With it on (the
	// default), runs of 5 failures open it and the 60 jobs wait out probes.
	in := startDaemon(t, srv, baseConfig(lane("flaky", "40/s", 100,
		"    retry: { max_attempts: 20, initial_backoff: 20ms, max_backoff: 200ms }\n    breaker: { failures: 0 }\n    dead_letter: dl.flaky\n", ds.URL)))
	dead := subscribeDead(t, in.nc, "dl.flaky")
	const jobs = 60
	for i := range jobs {
		if r := in.request(t, "shaper.jobs.flaky", []byte(fmt.Sprint(i)), nil); r.Status != "accepted" {
			t.Fatalf("reply %+v", r)
		}
	}
	waitFor(t, 30*time.Second, func() bool {
		return in.metric(t, `shaper_jobs_delivered_total{downstream="flaky",outcome="success"}`) == jobs
	}, "every job delivered")
	hits := ds.snapshot()
	ok, failed := map[string]int{}, 0
	for _, h := range hits {
		if failTry(h.jobID, fmt.Sprint(h.attempt)) {
			failed++
		} else {
			ok[h.body]++
		}
	}
	if len(ok) != jobs {
		t.Errorf("%d distinct jobs succeeded, want %d", len(ok), jobs)
	}
	if failed < jobs/6 {
		t.Errorf("only %d of %d tries failed: not a flaky downstream", failed, len(hits))
	}
	checkPace(t, hits, 40)
	t.Logf("%d jobs delivered over %d tries (%d failed), most starts in any 1 s: %d at 40/s",
		jobs, len(hits), failed, maxInWindow(hits, time.Second))
	select {
	case m := <-dead:
		t.Errorf("dead letter %s: %s", m.Header.Get("Shaper-Reason"), m.Header.Get("Shaper-Error"))
	default:
	}
}

// failTry is a fair coin keyed by job id and attempt: the low bit of a
// SHA-256, so every try is an independent coin. (The low bit of an FNV-1a
// hash, used before, is the parity of the bytes' low bits: consecutive
// attempts alternated, so a job failed at most once and the failure count
// was Binomial(60, 1/2), under 20 in about 1 run in 300.) Job ids are random,
// so a job failing 20 tries has probability 2^-20; over 60 jobs, ~0.006 %.
// Failed tries are then a sum of 60 geometric counts, mean 60: fewer than
// jobs/6 = 10 has probability below 1e-7.
func failTry(jobID, attempt string) bool {
	sum := sha256.Sum256([]byte(jobID + "/" + attempt))
	return sum[0]&1 == 0
}

// maxOverlap is the most intervals [a, a+d) open at once.
func maxOverlap(starts []time.Time, d time.Duration) int {
	most := 0
	for _, a := range starts {
		n := 0
		for _, b := range starts {
			if !b.After(a) && a.Before(b.Add(d)) {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// A downstream that never answers: tries time out, in-flight stays at
// concurrency, the queue fills to its bound and then rejects, and every job
// is accounted for.
func TestHangingDownstream(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	release := make(chan struct{})
	var mu sync.Mutex
	var arrivals []time.Time
	hang := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the body first: only then does the server watch the
		// connection and cancel r.Context() when the client gives up.
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = hang.Serve(ln) }()
	t.Cleanup(func() { close(release); _ = hang.Close() })

	cfg := baseConfig(fmt.Sprintf(`
  stuck:
    rate: 20/s
    concurrency: 2
    queue: { capacity: 5, backend: memory }
    sink:
      http: { url: "http://%s/", timeout: 300ms }
    retry: { max_attempts: 2, initial_backoff: 50ms, max_backoff: 50ms }
    breaker: { failures: 0 }  # every job dead-lettered after its tries, none held
    dead_letter: dl.stuck
`, ln.Addr()))
	in := startDaemon(t, srv, cfg)
	dead := subscribeDead(t, in.nc, "dl.stuck")
	counts := map[string]int{}
	for i := range 20 {
		r := in.request(t, "shaper.jobs.stuck", []byte(fmt.Sprint(i)), nil)
		counts[r.Status+"/"+r.Reason]++
	}
	if counts["rejected/queue_full"] == 0 || counts["accepted/"]+counts["rejected/queue_full"] != 20 {
		t.Fatalf("replies %v: the bound did not hold", counts)
	}
	for range counts["accepted/"] {
		m := recvMsg(t, dead, 20*time.Second)
		if m.Header.Get("Shaper-Reason") != "failed" || !strings.Contains(m.Header.Get("Shaper-Error"), "timeout") {
			t.Errorf("dead letter reason %q", m.Header.Get("Shaper-Reason"))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// The shaper frees a slot when its 300 ms timeout fires, counted from
	// when it started the try; the server only sees the arrival, which on a
	// busy machine can lag the start by tens of milliseconds (and notices
	// the hang-up later still). So each try is taken to hold
	// [arrival, arrival+200ms): up to 100 ms of arrival lag is forgiven,
	// while a broken bound (tries every 50 ms at 20/s) still shows four or
	// more at once.
	most := maxOverlap(arrivals, 200*time.Millisecond)
	t.Logf("hanging downstream: replies %v, most in flight %d (concurrency 2)", counts, most)
	if most > 2 {
		t.Errorf("%d requests in flight to a hanging downstream; concurrency is 2", most)
	}
	if got := in.metricReaches(t, `shaper_jobs_delivered_total{downstream="stuck",outcome="dead_lettered"}`, float64(counts["accepted/"])); int(got) != counts["accepted/"] {
		t.Errorf("dead_lettered %v, accepted %d", got, counts["accepted/"])
	}
}

// Connection refused is retried and then dead-lettered with the cause.
func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	in := startDaemon(t, srv, baseConfig(lane("gone", "50/s", 5,
		"    retry: { max_attempts: 3, initial_backoff: 20ms, max_backoff: 50ms }\n    dead_letter: dl.gone\n", "http://"+addr+"/")))
	dead := subscribeDead(t, in.nc, "dl.gone")
	in.request(t, "shaper.jobs.gone", []byte("x"), nil)
	m := recvMsg(t, dead, 10*time.Second)
	if m.Header.Get("Shaper-Reason") != "failed" || !strings.Contains(m.Header.Get("Shaper-Error"), "refused") {
		t.Errorf("dead letter %q: %q", m.Header.Get("Shaper-Reason"), m.Header.Get("Shaper-Error"))
	}
	if got := in.metric(t, `shaper_job_retries_total{downstream="gone"}`); got != 2 {
		t.Errorf("retries = %v, want 2", got)
	}
}

// A 429 with Retry-After: 10 pauses that downstream alone for 10 ± 1 s;
// another downstream keeps its pace meanwhile.
func TestPushbackPausesOnlyThatDownstream(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 10 s; run without -short")
	}
	t.Parallel()
	srv := runNATS(t)
	limited := newDownstream(t)
	limited.respond = func(n int, _ *http.Request) (int, map[string]string) {
		if n == 1 {
			return http.StatusTooManyRequests, map[string]string{"Retry-After": "10"}
		}
		return http.StatusOK, nil
	}
	other := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(
		fmt.Sprintf(`
  limited:
    rate: 10/s
    queue: { capacity: 10, backend: memory, max_wait: 2m }
    sink: { http: { url: %q } }
`, limited.URL),
		lane("other", "2/s", 100, "", other.URL)))
	in.request(t, "shaper.jobs.limited", []byte("a"), nil)
	in.request(t, "shaper.jobs.limited", []byte("b"), nil)
	for i := range 70 {
		in.request(t, "shaper.jobs.other", []byte(fmt.Sprint(i)), nil)
	}
	hits := limited.waitHits(t, 3, 20*time.Second)
	pause := hits[1].at.Sub(hits[0].at)
	if pause < 9*time.Second || pause > 11*time.Second {
		t.Errorf("limited downstream paused %s, want 10 ± 1 s", pause)
	}
	t.Logf("pushback pause %s", pause.Round(time.Millisecond))
	if hits[1].body != "a" || hits[2].body != "b" {
		t.Errorf("after the pause: %q then %q, want a then b", hits[1].body, hits[2].body)
	}
	during := 0
	for _, h := range other.snapshot() {
		if h.at.After(hits[0].at) && h.at.Before(hits[1].at) {
			during++
		}
	}
	if want := int(pause.Seconds() * 2); during < want-2 || during > want+2 {
		t.Errorf("other downstream made %d starts during the 10 s pause, want ≈%d", during, want)
	}
	t.Logf("other downstream: %d starts at 2/s during the pause", during)
}

// SIGTERM (context cancel) under load: every accepted job is either
// delivered exactly once or dead-lettered with reason shutdown exactly
// once; nothing is lost and nothing doubled.
func TestShutdownUnderLoadLosesNothing(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	ds.delay = 20 * time.Millisecond
	in := startDaemon(t, srv, baseConfig(lane("busy", "100/s", 200, "    concurrency: 4\n    dead_letter: dl.busy\n", ds.URL)))
	watcher, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	dead := subscribeDead(t, watcher, "dl.busy")

	var mu sync.Mutex
	accepted := map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("%d-%d", p, i)
				resp, err := in.nc.Request("shaper.jobs.busy", []byte(id), 2*time.Second)
				if err != nil {
					return // the daemon stopped answering: shutdown
				}
				if resp.Header.Get("Shaper-Status") == "accepted" {
					mu.Lock()
					accepted[id] = true
					mu.Unlock()
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	in.stop(t)
	close(stop)
	wg.Wait()

	seen := map[string]string{}
	for _, h := range ds.snapshot() {
		if prev, dup := seen[h.body]; dup {
			t.Errorf("job %s delivered twice (%s)", h.body, prev)
		}
		seen[h.body] = "delivered"
	}
	deadline := time.After(10 * time.Second)
	for len(seen) < len(accepted) {
		select {
		case m := <-dead:
			id := string(m.Data)
			if prev, dup := seen[id]; dup {
				t.Errorf("job %s dead-lettered after %s", id, prev)
			}
			if m.Header.Get("Shaper-Reason") != "shutdown" {
				t.Errorf("job %s dead-lettered as %s", id, m.Header.Get("Shaper-Reason"))
			}
			seen[id] = "dead-lettered"
		case <-deadline:
			t.Fatalf("%d accepted, %d accounted for", len(accepted), len(seen))
		}
	}
	for id := range accepted {
		if seen[id] == "" {
			t.Errorf("accepted job %s lost", id)
		}
	}
	t.Logf("shutdown under load: %d accepted, %d delivered, %d dead-lettered (shutdown), 0 lost, 0 doubled",
		len(accepted), len(ds.snapshot()), len(accepted)-len(ds.snapshot()))
	if len(accepted) < 50 {
		t.Errorf("only %d jobs accepted: the test did not load the daemon", len(accepted))
	}
}
