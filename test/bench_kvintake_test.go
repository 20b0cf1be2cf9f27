package test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// BenchmarkIntakeKVAdmission measures accepted requests/s through a daemon
// whose downstream keeps its admission state in NATS KV (store: nats,
// exact) against the same daemon set-up with the in-memory limiter, at 64
// requests in flight over 10 000 keys, alternating rounds in one run:
//
//	go test ./test -run '^$' -bench BenchmarkIntakeKVAdmission -benchtime 5x
//
// The limit admits everything, so every KV decision is a read-modify-write.
func BenchmarkIntakeKVAdmission(b *testing.B) {
	const roundSize = 5000
	srv := runNATS(b)
	conf := func(name, store string) string {
		return `
nats: { url: "%NATS%" }
admin: { listen: "127.0.0.1:0" }
ingress: { subject_prefix: "kvbench.` + name + `" }
shutdown_grace: 1s
downstreams:
  ` + name + `:
    rate: 1/s
    queue: { capacity: 1000000, backend: memory }
    admission: { mode: token_bucket, rate: 1000000/s, burst: 1000, store: ` + store + ` }
    sink: { nats: { subject: bench.sink } }
`
	}
	mem := startDaemon(b, srv, conf("mem", "memory"))
	kv := startDaemon(b, srv, conf("kv", "nats"))
	var m, k []float64
	b.ResetTimer()
	for range b.N {
		m = append(m, keyedRound(b, mem.nc, "kvbench.mem.mem", roundSize))
		k = append(k, keyedRound(b, kv.nc, "kvbench.kv.kv", roundSize))
	}
	b.StopTimer()
	b.ReportMetric(median(m), "memory-req/s")
	b.ReportMetric(median(k), "nats-kv-req/s")
	b.ReportMetric(median(k)/median(m), "kv/memory")
}

// keyedRound sends n requests over 10 000 keys with inFlight outstanding and
// returns accepted requests per second.
func keyedRound(b *testing.B, nc *nats.Conn, subject string, n int) float64 {
	var next, accepted atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range inFlight {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				m := nats.NewMsg(subject)
				m.Header.Set("Shaper-Key", fmt.Sprint("tenant-", i%10000))
				resp, err := nc.RequestMsg(m, 10*time.Second)
				if err != nil {
					b.Error(err)
					return
				}
				if resp.Header.Get("Shaper-Status") == "accepted" {
					accepted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if accepted.Load() != int64(n) {
		b.Fatalf("%s: %d of %d accepted", subject, accepted.Load(), n)
	}
	return float64(n) / time.Since(start).Seconds()
}
