package test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/shaper/producer"
)

// outcomeModes are the outcomes settings the outcome benchmarks compare:
// no records, records (the default), records and events.
var outcomeModes = []struct{ name, yaml string }{
	{"off", "outcomes: { keep: 0s }"},
	{"records", "outcomes: { keep: 24h }"},
	{"records+events", "outcomes: { keep: 24h, events: true }"},
}

// BenchmarkOutcomesDrain is BenchmarkDurableDrain on both backends with
// job records off, on, and on with events, side by side in one run: the
// drain ceiling each costs. Run it -short, like BenchmarkDurableDrain:
//
//	go test ./test -short -run '^$' -bench '^BenchmarkOutcomesDrain$' -benchtime 20000x -count 6
func BenchmarkOutcomesDrain(b *testing.B) {
	for _, backend := range []string{"memory", "jetstream"} {
		for _, mode := range outcomeModes {
			b.Run(backend+"/"+mode.name, func(b *testing.B) { benchDrain(b, backend, mode.yaml) })
		}
	}
}

// benchDrain queues b.N jobs on a paused downstream of backend with
// outcomes, resumes it and times the drain until the HTTP downstream has
// answered every job, in jobs/s.
func benchDrain(b *testing.B, backend, outcomes string) {
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
    queue: { capacity: %d, backend: %s }
    sink:
      http: { url: %q, timeout: 5s }
    %s
`, b.N+1, backend, ds.URL, outcomes)))
	post := func(path string) {
		resp, err := http.Post(in.admin+path, "application/json", nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("POST %s: %v %v", path, resp, err)
		}
		resp.Body.Close()
	}
	post("/v1/downstreams/erp/pause")
	fill(b, in.nc, "shaper.jobs.erp", b.N)
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

// fill queues n jobs on subject from 16 producers, each job accepted.
func fill(b *testing.B, nc *nats.Conn, subject string, n int) {
	fillWith(b, nc, subject, n, []byte("job"))
}

// BenchmarkOutcomesIntake is accepted requests/s, 64 in flight, on both
// backends with job records off, on, and on with events: what records
// cost at intake.
//
//	go test ./test -short -run '^$' -bench '^BenchmarkOutcomesIntake$' -benchtime 20000x -count 6
func BenchmarkOutcomesIntake(b *testing.B) {
	accepted := func(m *nats.Msg) bool { return m.Header.Get("Shaper-Status") == "accepted" }
	for _, backend := range []string{"memory", "jetstream"} {
		for _, mode := range outcomeModes {
			b.Run(backend+"/"+mode.name, func(b *testing.B) {
				srv := runNATS(b)
				in := startDaemon(b, srv, baseConfig(fmt.Sprintf(`
  slow:
    rate: 1/s
    queue: { capacity: 1000000, backend: %s }
    sink: { nats: { subject: bench.sink } }
    %s
`, backend, mode.yaml)))
				benchRequests(b, in.nc, "shaper.jobs.slow", accepted)
			})
		}
	}
}

// BenchmarkSubmitAndWait is the round trip a producer feels at low load:
// producer.SubmitAndWait of one job at a time, accept to outcome, against
// a downstream that answers at once, on both backends; beside it, the
// baseline of the same run: Submit, accept only.
//
//	go test ./test -short -run '^$' -bench '^BenchmarkSubmitAndWait$' -benchtime 2000x -count 6
func BenchmarkSubmitAndWait(b *testing.B) {
	for _, backend := range []string{"memory", "jetstream"} {
		b.Run(backend+"/submit", func(b *testing.B) { benchSubmit(b, backend, false) })
		b.Run(backend+"/wait", func(b *testing.B) { benchSubmit(b, backend, true) })
	}
}

// benchSubmit sends b.N jobs one at a time with Submit, or SubmitAndWait
// when wait is set.
func benchSubmit(b *testing.B, backend string, wait bool) {
	srv := runNATS(b)
	ds := newDownstream(b)
	in := startDaemon(b, srv, baseConfig(fmt.Sprintf(`
  erp:
    rate: 100000/s
    concurrency: 4
    queue: { capacity: 1000, backend: %s }
    sink: { http: { url: %q, timeout: 5s } }
`, backend, ds.URL)))
	c, err := producer.New(in.nc)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if wait {
			out, err := c.SubmitAndWait(ctx, "erp", []byte("job"))
			if err != nil || out.State != "succeeded" {
				b.Fatalf("SubmitAndWait: %+v %v", out, err)
			}
		} else if r, err := c.Submit(ctx, "erp", []byte("job")); err != nil || !r.Accepted {
			b.Fatalf("Submit: %+v %v", r, err)
		}
		cancel()
	}
}
