package test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// BenchmarkAcrossRegionsIntake is the latency of an accepted reply to a
// producer in region east, one request at a time, with the downstream's
// stream in east itself and placed in home across a gateway
// (queue.placement), on a super-cluster of three single-node clusters on
// loopback: the added hop, not a WAN's round trip (add that: 20-100 ms
// between regions). Reports p50 and p99 in µs over b.N requests.
//
//	go test ./test -short -run '^$' -bench '^BenchmarkAcrossRegionsIntake$' -benchtime 2000x -count 3
func BenchmarkAcrossRegionsIntake(b *testing.B) {
	srvs := runSuperCluster(b, "home", "east", "west")
	east := srvs[1]
	for _, place := range []string{"east", "home"} {
		b.Run("stream_in_"+place, func(b *testing.B) {
			ds := newDownstream(b)
			name := "erp" + place
			in := startDaemon(b, east, fmt.Sprintf(`
nats: { url: "%%NATS%%" }
admin: { listen: "127.0.0.1:0" }
shutdown_grace: 2s
downstreams:
  %s:
    rate: 100000/s
    queue: { capacity: %d, backend: jetstream, placement: { cluster: %s } }
    outcomes: { keep: 0 }
    sink: { http: { url: %q } }
`, name, b.N+10, place, ds.URL))
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				m := nats.NewMsg("shaper.jobs." + name)
				m.Data = []byte(fmt.Sprint("job-", i))
				t0 := time.Now()
				r, err := in.nc.RequestMsg(m, 10*time.Second)
				if err != nil || r.Header.Get("Shaper-Status") != "accepted" {
					b.Fatalf("job %d: %v %v", i, err, r)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}
