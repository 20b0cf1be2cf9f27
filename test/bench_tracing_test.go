package test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/cmd/shaperd/daemon"
)

// BenchmarkTracing is what exporting spans costs: intake (accepted/s, 16
// producers) and the drain ceiling (jobs/s; rate 100 000/s, concurrency
// 32, records off) with tracing off and on (every span sampled, exported
// over OTLP/HTTP to an endpoint that answers at once), on both backends,
// side by side in one run. Each job carries a producer's traceparent.
//
//	go test ./test -short -run '^$' -bench '^BenchmarkTracing$' -benchtime 20000x -count 3
func BenchmarkTracing(b *testing.B) {
	var exported atomic.Int64
	otlp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		exported.Add(r.ContentLength)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer otlp.Close()
	for _, backend := range []string{"memory", "jetstream"} {
		for _, on := range []bool{false, true} {
			name := backend + "/off"
			env := func(string) string { return "" }
			if on {
				name = backend + "/on"
				env = func(k string) string {
					switch k {
					case "OTEL_EXPORTER_OTLP_ENDPOINT":
						return otlp.URL
					case "OTEL_SERVICE_NAME":
						return "shaperd-bench"
					}
					return ""
				}
			}
			b.Run(name, func(b *testing.B) { tracingRound(b, backend, env) })
		}
	}
}

func tracingRound(b *testing.B, backend string, env func(string) string) {
	srv := runNATS(b)
	var jobs atomic.Int64
	done := make(chan struct{})
	ds := newDownstream(b)
	ds.respond = func(int, *http.Request) (int, map[string]string) {
		if jobs.Add(1) == int64(b.N) {
			close(done)
		}
		return http.StatusOK, nil
	}
	in, _ := startDaemonOpts(b, srv, baseConfig(fmt.Sprintf(`
  erp:
    rate: 100000/s
    concurrency: 32
    queue: { capacity: %d, backend: %s }
    outcomes: { keep: 0 }
    sink:
      http: { url: %q, timeout: 5s }
`, b.N+1, backend, ds.URL)), daemon.Options{Getenv: env})
	benchPost(b, in.admin+"/v1/downstreams/erp/pause")
	b.ResetTimer()
	t0 := time.Now()
	fillTraced(b, in, b.N)
	intake := time.Since(t0)
	t1 := time.Now()
	benchPost(b, in.admin+"/v1/downstreams/erp/resume")
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		b.Fatalf("the downstream answered %d of %d jobs within 2 min", jobs.Load(), b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/intake.Seconds(), "accepted/s")
	b.ReportMetric(float64(b.N)/time.Since(t1).Seconds(), "drained/s")
}

// fillTraced queues n jobs on erp from 16 producers, each with a
// producer's traceparent, each accepted.
func fillTraced(b *testing.B, in *instance, n int) {
	fillMsgs(b, in.nc, n, func(i int) *nats.Msg {
		m := nats.NewMsg("shaper.jobs.erp")
		m.Header["traceparent"] = []string{fmt.Sprintf("00-4bf92f3577b34da6a3ce929d0e0e%04x-00f067aa0ba902b7-01", i%0xffff)}
		m.Data = []byte("job")
		return m
	})
}
