package limiter

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	"golang.org/x/time/rate"
)

// Benchmarks: one decision per op, for every algorithm and the two things a
// Go user would otherwise use, side by side in one run, named
// BenchmarkDecide/keys=<n>/impl=<subject>/mode=<serial|parallel> so that
// benchstat can put the subjects side by side:
//
//	go test ./limiter -run '^$' -bench BenchmarkDecide -benchmem -count 6 >bench.txt
//	benchstat -col /impl bench.txt
//
// (benchstat is golang.org/x/perf/cmd/benchstat; 6 runs is the fewest for
// which it gives a confidence interval.) The x/time/rate map runs first, so
// it is benchstat's base column and every other subject's "vs base" is its
// time per decision relative to the map's: −50 % is twice the map's speed.
//
// All share the same limit (10/s with a burst of 20, or 20 per 2 s), the same
// key sequence (xorshift over the key set) and the same instants (benchStep
// apart per goroutine); time is passed in, never read (throttled takes it
// from its store, whose clock is set to follow the same instants).

const (
	benchRate   = 10
	benchBurst  = 20
	benchWindow = 2 * time.Second
	// benchStep is the virtual time between a goroutine's decisions: one key
	// sees 10 000 requests a second and is mostly rejected; each of 10 000 or
	// 1 000 000 keys sees at most 1 a second and is admitted, as most
	// requests to a limiter are.
	benchStep = 100 * time.Microsecond
)

type benchSubject interface {
	allow(key string, now time.Time) bool
}

type keyedSubject struct{ k *Keyed }

func (s keyedSubject) allow(key string, now time.Time) bool {
	d, _ := s.k.AllowAt(key, now, 1)
	return d.Allowed
}

// rateMap is the usual Go idiom: a map of *rate.Limiter behind an RWMutex.
type rateMap struct {
	mu sync.RWMutex
	m  map[string]*rate.Limiter
}

func (s *rateMap) allow(key string, now time.Time) bool {
	s.mu.RLock()
	l := s.m[key]
	s.mu.RUnlock()
	if l == nil {
		s.mu.Lock()
		if l = s.m[key]; l == nil {
			l = rate.NewLimiter(benchRate, benchBurst)
			s.m[strings.Clone(key)] = l
		}
		s.mu.Unlock()
	}
	return l.AllowN(now, 1)
}

// throttledSubject is throttled's GCRA over store/memstore. memstore keeps
// the caller's key string, and keyGen's strings alias a reused buffer, so
// keys are cloned on insert (as rateMap does); and memstore takes the time
// from its clock, which follows the instants passed in (to 10 ms, so that a
// parallel run rarely writes the shared clock) instead of reading
// time.Now().
type throttledSubject struct {
	l   *throttled.GCRARateLimiterCtx
	now *atomic.Int64 // Unix ns, read by the store's clock
}

type clonedKeys struct{ *memstore.MemStore }

func (s clonedKeys) SetIfNotExistsWithTTL(key string, value int64, ttl time.Duration) (bool, error) {
	return s.MemStore.SetIfNotExistsWithTTL(strings.Clone(key), value, ttl)
}

func newThrottled(tb testing.TB) throttledSubject {
	st, err := memstore.New(0) // unbounded: a map[string]*int64 behind an RWMutex
	must(tb, err)
	now := new(atomic.Int64)
	st.SetTimeNow(func() time.Time { return time.Unix(0, now.Load()) })
	l, err := throttled.NewGCRARateLimiterCtx(throttled.WrapStoreWithContext(clonedKeys{st}), throttled.RateQuota{MaxRate: throttled.PerSec(benchRate), MaxBurst: benchBurst - 1})
	must(tb, err)
	return throttledSubject{l, now}
}

func (s throttledSubject) allow(key string, now time.Time) bool {
	if ns := now.UnixNano(); ns > s.now.Load()+int64(10*time.Millisecond) {
		s.now.Store(ns)
	}
	limited, _, _ := s.l.RateLimitCtx(context.Background(), key, 1)
	return !limited
}

type benchImpl struct {
	name string
	make func(tb testing.TB) benchSubject
}

// benchImpls lists the subjects, the x/time/rate map first (benchstat's
// base column).
func benchImpls() []benchImpl {
	impls := []benchImpl{{"x_time_rate_map", func(tb testing.TB) benchSubject {
		return &rateMap{m: map[string]*rate.Limiter{}}
	}}}
	for _, mode := range Modes {
		impls = append(impls, benchImpl{string(mode), func(tb testing.TB) benchSubject {
			k, err := NewKeyed(Config{Mode: mode, Rate: benchRate, Burst: benchBurst, Limit: benchBurst, Window: benchWindow, MaxKeys: 2 << 20})
			must(tb, err)
			return keyedSubject{k}
		}})
	}
	return append(impls, benchImpl{"throttled_gcra", func(tb testing.TB) benchSubject { return newThrottled(tb) }})
}

// keyGen writes "tenant-<8 hex digits of i>" into one of two buffers in
// turn. Building a key costs every subject the same and little: the prefix
// is written once and the digits with one 8-byte store.
// The loops build the next request's key before deciding on the current
// one, so the key a subject hashes was written one decision earlier: hot in
// cache, as a key parsed from a request a moment before would be. A key
// written by the instructions just before the hash would stall
// store-to-load forwarding (the hash's wide loads overlap narrow stores
// still in flight), a cost of the benchmark loop and not of any subject.
// The strings alias the buffers, so subjects that keep keys clone them on
// insert (before timing starts).
type keyGen struct {
	buf [2][16]byte
	n   int
}

func (g *keyGen) key(i int) string {
	g.n ^= 1
	b := g.buf[g.n][:15]
	if b[0] == 0 {
		copy(b, "tenant-")
	}
	binary.LittleEndian.PutUint64(b[7:], hex8(uint32(i)))
	return unsafe.String(&b[0], len(b))
}

// hex8 returns the 8 lower-case hex digits of x as the bytes of a
// little-endian word, most significant digit first.
func hex8(x uint32) uint64 {
	v := uint64(x)
	v = (v | v<<16) & 0x0000FFFF0000FFFF
	v = (v | v<<8) & 0x00FF00FF00FF00FF
	v = (v | v<<4) & 0x0F0F0F0F0F0F0F0F // byte k holds digit k, least significant first
	v = bits.ReverseBytes64(v)
	letters := (v + 0x0606060606060606) >> 4 & 0x0101010101010101 // 1 in each byte >= 10
	return v + 0x3030303030303030 + letters*('a'-'0'-10)
}

// pick maps a random 64-bit value onto 0..n-1 without a division.
func pick(x *xorshift, n int) int { return int((x.next() >> 32) * uint64(n) >> 32) }

func BenchmarkDecide(b *testing.B) {
	for _, nkeys := range []int{1, 10_000, 1_000_000} {
		for _, impl := range benchImpls() {
			b.Run("keys="+strconv.Itoa(nkeys)+"/impl="+impl.name, func(b *testing.B) {
				s := impl.make(b)
				var g keyGen
				for i := range nkeys { // every key live before timing
					s.allow(g.key(i), t0.Add(time.Duration(i)))
				}
				// Collect the set-up's garbage (and earlier subjects') now:
				// a GC cycle during timing takes one of the two Ps and
				// halves a parallel figure.
				runtime.GC()
				// One virtual clock per subject, carried across runs (b.N
				// ramps and -count reruns share the state): time never goes
				// backwards for a key.
				var seq atomic.Uint64
				var vt atomic.Int64
				vt.Store(t0.Add(time.Second).UnixNano())
				b.Run("mode=serial", func(b *testing.B) {
					b.ReportAllocs()
					x := xorshift(seq.Add(1) * 0x9E3779B97F4A7C15)
					now := time.Unix(0, vt.Load()).UTC()
					var g keyGen
					key := g.key(pick(&x, nkeys))
					for b.Loop() {
						now = now.Add(benchStep)
						next := g.key(pick(&x, nkeys))
						s.allow(key, now)
						key = next
					}
					vt.Store(now.UnixNano())
				})
				b.Run("mode=parallel", func(b *testing.B) {
					b.ReportAllocs()
					start := vt.Load()
					b.RunParallel(func(pb *testing.PB) {
						x := xorshift(seq.Add(1) * 0x9E3779B97F4A7C15)
						now := time.Unix(0, start).UTC()
						var g keyGen
						key := g.key(pick(&x, nkeys))
						for pb.Next() {
							now = now.Add(benchStep)
							next := g.key(pick(&x, nkeys))
							s.allow(key, now)
							key = next
						}
						for v := vt.Load(); v < now.UnixNano() && !vt.CompareAndSwap(v, now.UnixNano()); v = vt.Load() {
						}
					})
				})
			})
		}
	}
}

// BenchmarkTimeNow is the cost the API spares each limiter call: read the
// clock once per request and pass it on.
func BenchmarkTimeNow(b *testing.B) {
	b.ReportAllocs()
	var t time.Time
	for b.Loop() {
		t = time.Now()
	}
	_ = t
}

func TestKeyGen(t *testing.T) {
	var g keyGen
	for _, i := range []int{0, 9, 10, 255, 0xabcdef, 999_999, 0x7fffffff} {
		if got, want := g.key(i), fmt.Sprintf("tenant-%08x", i); got != want {
			t.Errorf("key(%d) = %q, want %q", i, got, want)
		}
	}
	a := g.key(1)
	if b := g.key(2); a != "tenant-00000001" || b != "tenant-00000002" {
		t.Errorf("consecutive keys %q, %q: the second overwrote the first", a, b)
	}
}
