package test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// BenchmarkDurableDrain measures the delivery side of a jetstream lane from
// outside: b.N jobs are queued while the downstream is paused, then it is
// resumed and the timer runs until the HTTP downstream has answered every
// one. The rate (100 000/s) and concurrency (32) bound nothing here: what
// is measured is the drain itself (fetch, take, start, deliver, ack), in
// jobs/s. Compare two commits' test binaries in alternate rounds, with
// -test.short: without it, TestMain builds the shaperd binary while the
// benchmark runs, where its source tree exists (one side only, if the
// other's worktree is gone):
//
//	go test ./test -short -run '^$' -bench '^BenchmarkDurableDrain$' -benchtime 20000x -count 6
func BenchmarkDurableDrain(b *testing.B) {
	srv := runNATS(b)
	ds := newDownstream(b)
	done := make(chan struct{})
	ds.respond = func(n int, _ *http.Request) (int, map[string]string) {
		if n == b.N {
			close(done)
		}
		return http.StatusOK, nil
	}
	in := startDaemon(b, srv, baseConfig(fmt.Sprintf(`
  erp:
    rate: 100000/s
    concurrency: 32
    queue: { capacity: %d, backend: jetstream }
    sink:
      http: { url: %q, timeout: 5s }
`, b.N+1, ds.URL)))
	post := func(path string) {
		resp, err := http.Post(in.admin+path, "application/json", nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("POST %s: %v %v", path, resp, err)
		}
		resp.Body.Close()
	}
	post("/v1/downstreams/erp/pause")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < b.N; i += 16 {
				m, err := in.nc.Request("shaper.jobs.erp", []byte("job"), 10*time.Second)
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
	b.ResetTimer()
	start := time.Now()
	post("/v1/downstreams/erp/resume")
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		b.Fatalf("the downstream answered %d of %d jobs within 2 min", len(ds.snapshot()), b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}
