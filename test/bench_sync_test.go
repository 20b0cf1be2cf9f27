package test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// BenchmarkStoreSync is what an fsync of every write costs: intake
// (accepted/s, 16 producers) and the drain (jobs/s, rate 100 000/s,
// concurrency 32, records off) of a jetstream downstream, with the
// store's sync at the server's default (2m) and at always, on one server
// (R1) and on a 3-node cluster (R3, replicas 3), side by side in one run.
// b.N jobs are queued while the downstream is paused (intake), then it is
// resumed (the drain).
//
//	go test ./test -short -run '^$' -bench '^BenchmarkStoreSync$' -benchtime 2000x -count 3
func BenchmarkStoreSync(b *testing.B) {
	for _, r := range []int{1, 3} {
		for _, always := range []bool{false, true} {
			mode := "default"
			if always {
				mode = "always"
			}
			b.Run(fmt.Sprintf("R%d/%s", r, mode), func(b *testing.B) { storeSyncRound(b, r, always) })
		}
	}
}

func storeSyncRound(b *testing.B, replicas int, always bool) {
	mod := func(o *server.Options) { o.SyncAlways = always }
	var srv *server.Server
	if replicas == 1 {
		opts := natsOptions(b)
		mod(&opts)
		var err error
		srv, err = server.NewServer(&opts)
		if err != nil {
			b.Fatal(err)
		}
		go srv.Start()
		if !srv.ReadyForConnections(10 * time.Second) {
			b.Fatal("nats server not ready")
		}
		b.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	} else {
		srv = runClusterWith(b, mod)[0]
	}
	var jobs atomic.Int64
	done := make(chan struct{})
	ep := newDownstream(b)
	ep.respond = func(int, *http.Request) (int, map[string]string) {
		if jobs.Add(1) == int64(b.N) {
			close(done)
		}
		return http.StatusOK, nil
	}
	in := startDaemon(b, srv, fmt.Sprintf(`
nats: { url: "%%NATS%%", jetstream: { replicas: %d } }
admin: { listen: "127.0.0.1:0" }
shutdown_grace: 2s
downstreams:
  erp:
    rate: 100000/s
    concurrency: 32
    queue: { capacity: %d, backend: jetstream }
    outcomes: { keep: 0 }
    sink:
      http: { url: %q, timeout: 5s }
`, replicas, b.N+1, ep.URL))
	benchPost(b, in.admin+"/v1/downstreams/erp/pause")
	b.ResetTimer()
	t0 := time.Now()
	fill(b, in.nc, "shaper.jobs.erp", b.N)
	intake := time.Since(t0)
	t1 := time.Now()
	benchPost(b, in.admin+"/v1/downstreams/erp/resume")
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("the downstream answered %d of %d jobs within 5 min", jobs.Load(), b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/intake.Seconds(), "accepted/s")
	b.ReportMetric(float64(b.N)/time.Since(t1).Seconds(), "drained/s")
}
