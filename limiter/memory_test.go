package limiter

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	"golang.org/x/time/rate"
)

// Bytes of heap per live key, measured from runtime.MemStats: the growth of
// HeapAlloc (after GC) while N distinct keys are each given one decision,
// divided by N. Key strings are created inside the measurement, so whatever
// a limiter keeps of them counts (Keyed keeps none: only a hash).
//
//	go test ./limiter -run TestMemoryPerKey -v -memkeys=1000000
var memKeys = flag.Int("memkeys", 20000, "live keys for TestMemoryPerKey")

func heapBytesPerKey(n int, build func() func(key string, now time.Time)) float64 {
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	allow := build()
	for i := range n {
		allow("tenant-"+strconv.Itoa(i), t0.Add(time.Duration(i)*time.Microsecond))
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	runtime.KeepAlive(allow)
	return float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(n)
}

func TestMemoryPerKey(t *testing.T) {
	n := *memKeys
	keyed := func(cfg Config, cost int) func() func(string, time.Time) {
		return func() func(string, time.Time) {
			cfg.MaxKeys = max(DefaultMaxKeys, 2*n)
			k, err := NewKeyed(cfg)
			must(t, err)
			return func(key string, now time.Time) {
				if d, _ := k.AllowAt(key, now, cost); !d.Allowed {
					t.Fatalf("setup: key %s rejected", key)
				}
			}
		}
	}
	// Window long enough that every state stays live (not fresh) throughout.
	long := 24 * time.Hour
	rows := []struct {
		name  string
		build func() func(string, time.Time)
		limit float64 // bytes per key the target allows; 0 = report only
	}{
		{"token_bucket", keyed(Config{Mode: TokenBucketMode, Rate: 1e-3, Burst: 20}, 1), 48},
		{"gcra", keyed(Config{Mode: GCRAMode, Rate: 1e-3, Burst: 20}, 1), 48},
		{"fixed_window", keyed(Config{Mode: FixedWindowMode, Limit: 100, Window: long}, 1), 48},
		{"sliding_counter", keyed(Config{Mode: SlidingCounterMode, Limit: 100, Window: long}, 1), 48},
		{"sliding_log limit=10, 1 entry", keyed(Config{Mode: SlidingLogMode, Limit: 10, Window: long}, 1), 0},
		{"sliding_log limit=10, full", keyed(Config{Mode: SlidingLogMode, Limit: 10, Window: long}, 10), 0},
		{"sliding_log limit=100, 1 entry", keyed(Config{Mode: SlidingLogMode, Limit: 100, Window: long}, 1), 0},
		{"sliding_log limit=100, full", keyed(Config{Mode: SlidingLogMode, Limit: 100, Window: long}, 100), 0},
		{"x_time_rate_map", func() func(string, time.Time) {
			m := map[string]*rate.Limiter{}
			return func(key string, now time.Time) {
				l := m[key]
				if l == nil {
					l = rate.NewLimiter(1e-3, 20)
					m[key] = l
				}
				l.AllowN(now, 1)
			}
		}, 0},
		{"throttled_gcra", func() func(string, time.Time) {
			st, err := memstore.New(0)
			must(t, err)
			l, err := throttled.NewGCRARateLimiterCtx(throttled.WrapStoreWithContext(st), throttled.RateQuota{MaxRate: throttled.PerHour(4), MaxBurst: 19})
			must(t, err)
			return func(key string, _ time.Time) { _, _, _ = l.RateLimitCtx(context.Background(), key, 1) }
		}, 0},
	}
	var out strings.Builder
	fmt.Fprintf(&out, "%d live keys:\n", n)
	for _, row := range rows {
		b := heapBytesPerKey(n, row.build)
		fmt.Fprintf(&out, "  %-32s %7.1f B/key\n", row.name, b)
		if row.limit > 0 && b > row.limit {
			t.Errorf("%s: %.1f bytes per key, target <= %.0f", row.name, b, row.limit)
		}
	}
	t.Log(out.String())
}
