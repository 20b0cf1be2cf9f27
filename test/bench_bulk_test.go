package test

import (
	"bytes"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// bulkProducers is the producers of BenchmarkBulkIntake, as the issue's
// comparison with other queues used.
const bulkProducers = 32

// BenchmarkBulkIntake compares, in one run and on both backends, the jobs
// per second the daemon accepts when 32 producers (a connection each)
// send them one by one against the same jobs (128 B each) in bulk
// requests of 100, each job alone and all or nothing: b.N jobs each way,
// into a queue that does not drain (rate 1/s, capacity 1 000 000). It
// reports the three figures and bulk ÷ single (the target: ≥ 2.5 on
// jetstream, ≥ 3 on memory).
//
//	go test -c -o /tmp/bulk.test ./test && cd test
//	/tmp/bulk.test -test.short -test.run '^$' -test.bench '^BenchmarkBulkIntake$' -test.benchtime 200000x
func BenchmarkBulkIntake(b *testing.B) {
	srv := runNATS(b)
	for _, backend := range []string{"memory", "jetstream"} {
		b.Run(backend, func(b *testing.B) {
			in := startDaemon(b, srv, `
nats: { url: "%NATS%" }
admin: { listen: "127.0.0.1:0" }
downstreams:
  slow:
    rate: 1/s
    queue: { capacity: 1000000, backend: `+backend+` }
    sink:
      nats: { subject: bench.sink }
`)
			single := benchJobs(b, srv.ClientURL(), b.N, func(nc *nats.Conn, _ int) int {
				m, err := nc.Request("shaper.jobs.slow", make([]byte, 128), 10*time.Second)
				if err != nil || m.Header.Get("Shaper-Status") != "accepted" {
					return 0
				}
				return 1
			}, 1)
			body := bulkBody(100, 128)
			sendBulk := func(atomic bool) func(nc *nats.Conn, _ int) int {
				return func(nc *nats.Conn, _ int) int {
					req := nats.NewMsg("shaper.bulk.slow")
					req.Data = body
					if atomic {
						req.Header.Set("Shaper-Bulk-Atomic", "true")
					}
					m, err := nc.RequestMsg(req, 10*time.Second)
					if err != nil {
						return 0
					}
					var r struct{ Accepted int }
					_ = json.Unmarshal(m.Data, &r)
					return r.Accepted
				}
			}
			bulk := benchJobs(b, srv.ClientURL(), b.N, sendBulk(false), 100)
			atomic := benchJobs(b, srv.ClientURL(), b.N, sendBulk(true), 100)
			b.ReportMetric(single, "single-jobs/s")
			b.ReportMetric(bulk, "bulk-jobs/s")
			b.ReportMetric(atomic, "atomic-jobs/s")
			b.ReportMetric(bulk/single, "bulk÷single")
			in.stop(b)
			if backend == "jetstream" {
				deleteStream(b, in.nc, "SHAPER_slow")
			}
		})
	}
}

// bulkBody is an NDJSON body of n jobs whose payloads are size bytes.
func bulkBody(n, size int) []byte {
	var buf bytes.Buffer
	data, _ := json.Marshal(string(bytes.Repeat([]byte("x"), size-2))) // a JSON string of size bytes
	for range n {
		buf.WriteString(`{"data":`)
		buf.Write(data)
		buf.WriteString("}\n")
	}
	return buf.Bytes()
}

// benchJobs sends jobs jobs from bulkProducers connections, per jobs a
// request (send returns how many it had accepted), and returns the
// accepted jobs per second; every job must be accepted.
func benchJobs(b *testing.B, url string, jobs int, send func(nc *nats.Conn, n int) int, per int) float64 {
	b.Helper()
	conns := make([]*nats.Conn, bulkProducers)
	for i := range conns {
		nc, err := nats.Connect(url)
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		conns[i] = nc
	}
	var next, ok atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for _, nc := range conns {
		wg.Go(func() {
			for next.Add(int64(per)) <= int64(jobs) {
				ok.Add(int64(send(nc, per)))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	want := int64(jobs / per * per)
	if ok.Load() != want {
		b.Fatalf("%d of %d jobs accepted", ok.Load(), want)
	}
	return float64(want) / elapsed.Seconds()
}
