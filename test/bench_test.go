package test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// inFlight is how many requests a benchmark keeps outstanding (issue 3: 64).
const inFlight = 64

// BenchmarkIntake compares accepted requests/s through the daemon with a
// bare NATS echo responder on the same server, at the same concurrency.
// The ratio of the two req/s figures is the claim in BENCHMARKS.md:
//
//	go test ./test -run '^$' -bench BenchmarkIntake -benchtime 20000x -count 5
func BenchmarkIntake(b *testing.B) {
	srv := runNATS(b)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()

	b.Run("bare-nats-echo", func(b *testing.B) {
		sub, err := nc.Subscribe("echo", func(m *nats.Msg) { _ = m.Respond(m.Data) })
		if err != nil {
			b.Fatal(err)
		}
		defer sub.Unsubscribe()
		_ = nc.Flush()
		runRequests(b, nc, "echo", func(*nats.Msg) bool { return true })
	})

	b.Run("shaperd", func(b *testing.B) {
		// A sink subject nobody reads and a rate no benchmark reaches: the
		// measured path is intake → admission → queue → reply.
		in := startDaemon(b, srv, `
nats: { url: "%NATS%" }
admin: { listen: "127.0.0.1:0" }
downstreams:
  fast:
    rate: 1000000/s
    concurrency: 64
    queue: { capacity: 1000000, backend: memory }
    sink:
      nats: { subject: bench.sink }
`)
		runRequests(b, in.nc, "shaper.jobs.fast", func(m *nats.Msg) bool {
			return m.Header.Get("Shaper-Status") == "accepted"
		})
	})
}

// runRequests sends b.N requests with inFlight outstanding and reports
// accepted req/s.
func runRequests(b *testing.B, nc *nats.Conn, subject string, ok func(*nats.Msg) bool) {
	b.ReportAllocs()
	payload := make([]byte, 128)
	var next, accepted atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				m, err := nc.Request(subject, payload, 10*time.Second)
				if err != nil {
					b.Error(err)
					return
				}
				if ok(m) {
					accepted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if accepted.Load() != int64(b.N) {
		b.Fatalf("%d of %d accepted", accepted.Load(), b.N)
	}
	b.ReportMetric(float64(accepted.Load())/elapsed.Seconds(), "accepted/s")
}
