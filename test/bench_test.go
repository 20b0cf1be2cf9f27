package test

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// inFlight is how many requests a benchmark keeps outstanding (64).
const inFlight = 64

// BenchmarkIntake compares accepted requests/s through the daemon with a
// bare NATS echo responder on the same server, at the same concurrency. The
// two alternate in rounds within one run, so a load change on the machine
// hits both; the reported ratio is median(daemon)/median(echo):
//
//	go test ./test -run '^$' -bench BenchmarkIntake -benchtime 7x
//
// b.N is the number of rounds; each round sends roundSize requests to each.
func BenchmarkIntake(b *testing.B) {
	const roundSize = 20000
	srv := runNATS(b)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.Subscribe("echo", func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	_ = nc.Flush()
	echoed := func(*nats.Msg) bool { return true }
	accepted := func(m *nats.Msg) bool { return m.Header.Get("Shaper-Status") == "accepted" }

	// intake: the drain is slow, so every job waits in the queue, as it does
	// in front of a real fragile backend. drain: the daemon also delivers
	// every job as fast as it can (a NATS publish per job) on the same cores.
	intake := startDaemon(b, srv, benchConfig("slow", "1/s"))
	drain := startDaemon(b, srv, benchConfig("fast", "1000000/s"))

	var echo, in, dr []float64
	b.ResetTimer()
	for range b.N {
		echo = append(echo, sendRound(b, nc, "echo", roundSize, echoed))
		in = append(in, sendRound(b, intake.nc, "bench.slow.slow", roundSize, accepted))
		dr = append(dr, sendRound(b, drain.nc, "bench.fast.fast", roundSize, accepted))
	}
	b.StopTimer()
	e, i, d := median(echo), median(in), median(dr)
	b.ReportMetric(e, "echo-req/s")
	b.ReportMetric(i, "intake-req/s")
	b.ReportMetric(d, "intake+drain-req/s")
	b.ReportMetric(i/e, "intake/echo")
	b.ReportMetric(d/e, "intake+drain/echo")
}

// sendRound sends n requests with inFlight outstanding and returns the
// accepted requests per second.
func sendRound(b *testing.B, nc *nats.Conn, subject string, n int, ok func(*nats.Msg) bool) float64 {
	payload := make([]byte, 128)
	var next, accepted atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
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
	if accepted.Load() != int64(n) {
		b.Fatalf("%s: %d of %d accepted", subject, accepted.Load(), n)
	}
	return float64(n) / elapsed.Seconds()
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// benchConfig is one memory-backed downstream with room for every request
// of a benchmark run, delivering to a NATS subject nobody reads.
// Each gets its own subject prefix: daemons on one server in one queue
// group would otherwise answer for each other's downstreams.
func benchConfig(name, rate string) string {
	return `
nats: { url: "%NATS%" }
admin: { listen: "127.0.0.1:0" }
ingress: { subject_prefix: "bench.` + name + `" }
shutdown_grace: 1s
downstreams:
  ` + name + `:
    rate: ` + rate + `
    concurrency: 64
    queue: { capacity: 1000000, backend: memory }
    sink:
      nats: { subject: bench.sink }
`
}
