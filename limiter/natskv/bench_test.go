package natskv

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shaperd/shaper/limiter"
)

// admitFunc is one instance's decision function.
type admitFunc func(key string, now time.Time, cost int) (limiter.Decision, error)

// BenchmarkStores compares decisions/s and p99 latency of the nats store
// (exact and approximate) and the memory store, for 1 and 3 instances
// (stores on their own connections; memory instances are independent) and
// for 1 hot key and 10 000 keys. The limit admits everything (rate 1e6/s),
// so every exact decision is a read-modify-write: the worst case.
//
//	go test ./natskv/ -run '^$' -bench Stores -benchtime 2s
func BenchmarkStores(b *testing.B) {
	cfg := limiter.Config{Mode: limiter.TokenBucketMode, Rate: 1e6, Burst: 1000}
	srv := runServer(b)
	for _, store := range []string{"memory", "nats", "nats-approx"} {
		for _, inst := range []int{1, 3} {
			for _, nkeys := range []int{1, 10000} {
				b.Run(fmt.Sprintf("store=%s/instances=%d/keys=%d", store, inst, nkeys), func(b *testing.B) {
					var fns []admitFunc
					for range inst {
						if store == "memory" {
							k, _ := limiter.NewKeyed(cfg)
							fns = append(fns, k.AllowAt)
							continue
						}
						st := newStore(b, srv, Settings{Timeout: 5 * time.Second})
						l, err := st.Limiter(fmt.Sprintf("bench%d", b.N), cfg, Options{Approximate: store == "nats-approx", FailClosed: true})
						if err != nil {
							b.Fatal(err)
						}
						b.Cleanup(func() { _ = l.Close() })
						fns = append(fns, l.AllowAt)
					}
					keys := make([]string, nkeys)
					for i := range keys {
						keys[i] = fmt.Sprint("tenant-", i)
					}
					benchDecisions(b, fns, keys)
				})
			}
		}
	}
}

func benchDecisions(b *testing.B, fns []admitFunc, keys []string) {
	var mu sync.Mutex
	var lat []time.Duration
	var worker, failed atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8) // 8 × GOMAXPROCS callers: enough to keep round trips overlapping
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		w := int(worker.Add(1))
		fn := fns[w%len(fns)]
		local := make([]time.Duration, 0, 1024)
		for i := w * 7919; pb.Next(); i++ {
			t := time.Now()
			if _, err := fn(keys[i%len(keys)], t, 1); err != nil {
				failed.Add(1) // e.g. compare-and-swap tries exhausted on a saturated hot key
			}
			local = append(local, time.Since(t))
		}
		mu.Lock()
		lat = append(lat, local...)
		mu.Unlock()
	})
	el := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(len(lat))/el.Seconds(), "decisions/s")
		b.ReportMetric(lat[len(lat)*99/100].Seconds()*1e6, "p99-µs")
		b.ReportMetric(float64(failed.Load())/float64(len(lat))*100, "%failed")
	}
}
