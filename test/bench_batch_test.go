package test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// BenchmarkBatchBulkEndpoint is jobs/s into a bulk endpoint that takes 2
// calls a second, with batch.max_jobs 100 and 1 000, on both backends: 6
// full calls are queued while the downstream is paused, then it is
// resumed, and the rate is the jobs over the span the calls took (from
// the first call's start to the last's, plus one interval: each call
// holds 1/rate). Expected: 200 and 2 000 jobs/s. Each round takes about
// 3 s; run it -short with -benchtime 1x:
//
//	go test ./test -short -run '^$' -bench '^BenchmarkBatchBulkEndpoint$' -benchtime 1x -count 3
func BenchmarkBatchBulkEndpoint(b *testing.B) {
	for _, backend := range []string{"memory", "jetstream"} {
		for _, maxJobs := range []int{100, 1000} {
			b.Run(fmt.Sprintf("%s/max_jobs=%d", backend, maxJobs), func(b *testing.B) {
				var sum float64
				for range b.N {
					sum += bulkEndpointRound(b, backend, maxJobs)
				}
				b.ReportMetric(sum/float64(b.N), "jobs/s")
			})
		}
	}
}

// bulkEndpointRound runs one round of BenchmarkBatchBulkEndpoint and
// returns its jobs/s.
func bulkEndpointRound(b *testing.B, backend string, maxJobs int) float64 {
	const rate, calls = 2.0, 6
	srv := runNATS(b)
	var (
		mu    sync.Mutex
		times []time.Time
		jobs  int
	)
	done := make(chan struct{})
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.Header.Get("Shaper-Batch-Size"))
		mu.Lock()
		times = append(times, time.Now())
		jobs += n
		if jobs == calls*maxJobs {
			close(done)
		}
		mu.Unlock()
	}))
	defer ep.Close()
	in := startDaemon(b, srv, baseConfig(fmt.Sprintf(`
  erp:
    rate: 2/s
    queue: { capacity: %d, backend: %s }
    batch: { max_jobs: %d, encoding: ndjson }
    sink:
      http: { url: %q, timeout: 5s }
`, calls*maxJobs, backend, maxJobs, ep.URL)))
	benchPost(b, in.admin+"/v1/downstreams/erp/pause")
	fillWith(b, in.nc, "shaper.jobs.erp", calls*maxJobs, []byte(`{"order":1}`))
	if backend == "jetstream" {
		time.Sleep(time.Second) // the drainer fetches its window, a call's worth, before the first call
	}
	b.ResetTimer()
	benchPost(b, in.admin+"/v1/downstreams/erp/resume")
	select {
	case <-done:
	case <-time.After(time.Minute):
		b.Fatalf("the endpoint got %d of %d jobs within a minute", jobs, calls*maxJobs)
	}
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	span := times[len(times)-1].Sub(times[0]).Seconds() + 1/rate
	return float64(jobs) / span
}

// BenchmarkBatchDrain is the drain ceiling with batches against one job
// per call, side by side: BenchmarkOutcomesDrain's lane (rate 100 000/s,
// concurrency 32, records off) with no batch and with batch.max_jobs 100,
// on both backends, into an endpoint that answers at once, in jobs/s.
//
//	go test ./test -short -run '^$' -bench '^BenchmarkBatchDrain$' -benchtime 20000x -count 6
func BenchmarkBatchDrain(b *testing.B) {
	for _, backend := range []string{"memory", "jetstream"} {
		for _, batch := range []struct{ name, yaml string }{
			{"one_per_call", ""},
			{"max_jobs=100", "batch: { max_jobs: 100, encoding: ndjson }"},
		} {
			b.Run(backend+"/"+batch.name, func(b *testing.B) { batchDrain(b, backend, batch.yaml) })
		}
	}
}

func batchDrain(b *testing.B, backend, batch string) {
	srv := runNATS(b)
	var jobs atomic.Int64
	done := make(chan struct{})
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int64(1)
		if s := r.Header.Get("Shaper-Batch-Size"); s != "" {
			n, _ = strconv.ParseInt(s, 10, 64)
		}
		if jobs.Add(n) == int64(b.N) {
			close(done)
		}
	}))
	defer ep.Close()
	in := startDaemon(b, srv, baseConfig(fmt.Sprintf(`
  erp:
    rate: 100000/s
    concurrency: 32
    queue: { capacity: %d, backend: %s }
    outcomes: { keep: 0 }
    sink:
      http: { url: %q, timeout: 5s }
    %s
`, b.N+1, backend, ep.URL, batch)))
	benchPost(b, in.admin+"/v1/downstreams/erp/pause")
	fillWith(b, in.nc, "shaper.jobs.erp", b.N, []byte(`{"order":1}`))
	b.ResetTimer()
	start := time.Now()
	benchPost(b, in.admin+"/v1/downstreams/erp/resume")
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		b.Fatalf("the endpoint got %d of %d jobs within 2 min", jobs.Load(), b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}

func benchPost(b *testing.B, url string) {
	resp, err := http.Post(url, "application/json", nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("POST %s: %v %v", url, resp, err)
	}
	resp.Body.Close()
}

// fillWith is fill with payload as every job's.
func fillWith(b *testing.B, nc *nats.Conn, subject string, n int, payload []byte) {
	fillMsgs(b, nc, n, func(int) *nats.Msg { return &nats.Msg{Subject: subject, Data: payload} })
}

// fillMsgs sends n jobs, msg(i) each, from 16 producers, each job
// accepted.
func fillMsgs(b *testing.B, nc *nats.Conn, n int, msg func(i int) *nats.Msg) {
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				m, err := nc.RequestMsg(msg(i), 10*time.Second)
				if err == nil && m.Header.Get("Shaper-Status") != "accepted" {
					err = fmt.Errorf("job %d: %s", i, m.Data)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
