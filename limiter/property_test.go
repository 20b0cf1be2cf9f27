package limiter

import (
	"math"
	"testing"
	"time"
)

// Invariants over random traces. Each property runs over seeded traces by
// default and is also a fuzz target: go test ./limiter -fuzz FuzzRetryAfterExact.

// traceConfig derives a valid config of the given mode from two bytes.
func traceConfig(mode Mode, a, b byte) Config {
	rates := []float64{0.5, 1, 2, 3, 7.5, 10, 100, 0.37, 1000}
	windows := []time.Duration{time.Second, 10 * time.Second, time.Minute, 1500 * time.Millisecond, 7 * time.Millisecond}
	switch mode {
	case TokenBucketMode, GCRAMode:
		return Config{Mode: mode, Rate: rates[int(a)%len(rates)], Burst: 1 + int(b)%20}
	default:
		return Config{Mode: mode, Limit: 1 + int(b)%20, Window: windows[int(a)%len(windows)]}
	}
}

type event struct {
	now  int64
	cost int
}

// traceFrom turns bytes into non-decreasing instants and costs: each pair is
// a gap (0–255 units of the scale, 0 meaning a simultaneous request) and a cost.
func traceFrom(data []byte, scale int64, capacity int) []event {
	var evs []event
	now := t0.UnixNano()
	for i := 0; i+1 < len(data); i += 2 {
		now += int64(data[i]) * scale
		evs = append(evs, event{now, 1 + int(data[i+1])%capacity})
	}
	return evs
}

func randomTrace(seed uint64, n int, scale int64, capacity int) []event {
	x := xorshift(seed | 1)
	data := make([]byte, 2*n)
	for i := range data {
		data[i] = byte(x.next())
		if i%2 == 1 && x.intn(4) != 0 {
			data[i] = 0 // mostly cost 1
		}
	}
	return traceFrom(data, scale, capacity)
}

// checkRetryAfterExact replays evs; at every rejection, a retry at
// now+RetryAfter must be admitted and one at now+RetryAfter−1ns must not.
func checkRetryAfterExact(t *testing.T, cfg Config, evs []event) {
	s := newStepper(t, cfg)
	for i, ev := range evs {
		probe := s.clone()
		d := s.step(ev.now, ev.cost)
		if d.Allowed {
			if d.RetryAfter != 0 {
				t.Fatalf("%+v event %d: allowed with RetryAfter %s", cfg, i, d.RetryAfter)
			}
			continue
		}
		if d.RetryAfter <= 0 {
			t.Fatalf("%+v event %d: rejected with RetryAfter %s", cfg, i, d.RetryAfter)
		}
		early := probe.clone()
		early.step(ev.now, ev.cost) // the rejection itself leaves the state as it was, or as it would have rolled
		if e := early.step(ev.now+int64(d.RetryAfter)-1, ev.cost); e.Allowed {
			t.Fatalf("%+v event %d at %d cost %d: RetryAfter %s, but admitted 1ns earlier", cfg, i, ev.now, ev.cost, d.RetryAfter)
		}
		late := probe.clone()
		late.step(ev.now, ev.cost)
		if l := late.step(ev.now+int64(d.RetryAfter), ev.cost); !l.Allowed {
			t.Fatalf("%+v event %d at %d cost %d: RetryAfter %s, but a retry then is rejected: %+v", cfg, i, ev.now, ev.cost, d.RetryAfter, l)
		}
	}
}

func TestRetryAfterExact(t *testing.T) {
	for _, mode := range Modes {
		for seed := uint64(1); seed <= 12; seed++ {
			cfg := traceConfig(mode, byte(seed), byte(seed*7))
			scale := []int64{1, 1e3, 1e6, 1e7}[seed%4]
			checkRetryAfterExact(t, cfg, randomTrace(seed, 2000, scale, capacityOf(cfg)))
		}
	}
}

func FuzzRetryAfterExact(f *testing.F) {
	f.Add(byte(0), byte(2), byte(9), []byte{0, 0, 0, 0, 0, 0, 10, 1, 200, 3, 0, 0})
	f.Add(byte(2), byte(0), byte(3), []byte{1, 1, 255, 0, 0, 2, 7, 7})
	f.Add(byte(3), byte(4), byte(5), []byte{0, 4, 0, 0, 1, 0, 0, 3, 9, 9})
	f.Add(byte(4), byte(1), byte(19), []byte{3, 0, 3, 0, 3, 0, 250, 2})
	f.Fuzz(func(t *testing.T, m, a, b byte, data []byte) {
		cfg := traceConfig(Modes[int(m)%len(Modes)], a, b)
		scale := []int64{1, 1e3, 1e6, 1e8}[int(m/8)%4]
		checkRetryAfterExact(t, cfg, traceFrom(data, scale, capacityOf(cfg)))
	})
}

// checkLogWindow: the sliding log never admits more than Limit units in any
// span [a, a+Window).
func checkLogWindow(t *testing.T, cfg Config, evs []event) {
	s := newStepper(t, cfg)
	var adm []event
	sum, j := 0, 0
	for _, ev := range evs {
		if !s.step(ev.now, ev.cost).Allowed {
			continue
		}
		adm = append(adm, ev)
		sum += ev.cost
		for adm[j].now <= ev.now-int64(cfg.Window) {
			sum -= adm[j].cost
			j++
		}
		if sum > cfg.Limit {
			t.Fatalf("%+v: %d units admitted in (%d, %d], limit %d", cfg, sum, ev.now-int64(cfg.Window), ev.now, cfg.Limit)
		}
	}
}

func TestSlidingLogNeverExceedsLimit(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		cfg := traceConfig(SlidingLogMode, byte(seed), byte(seed*3))
		checkLogWindow(t, cfg, randomTrace(seed, 3000, []int64{1, 1e5, 1e7, 1e8}[seed%4], cfg.Limit))
	}
}

func FuzzSlidingLogWindow(f *testing.F) {
	f.Add(byte(0), byte(4), []byte{0, 1, 0, 0, 5, 2, 200, 0})
	f.Add(byte(4), byte(0), []byte{1, 0, 1, 0, 1, 0})
	f.Fuzz(func(t *testing.T, a, b byte, data []byte) {
		cfg := traceConfig(SlidingLogMode, a, b)
		checkLogWindow(t, cfg, traceFrom(data, int64(cfg.Window)/64+1, cfg.Limit))
	})
}

// checkBucketSpan: a token bucket (or GCRA) never admits more than
// Burst + Rate×T units in any closed span of length T. In O(n): the most over
// spans ending at j is S_j − Rate×t_j − min over i<=j of (S_{i−1} − Rate×t_i).
func checkBucketSpan(t *testing.T, cfg Config, evs []event) {
	s := newStepper(t, cfg)
	rate := cfg.Rate
	if cfg.Mode == GCRAMode {
		rate = 1e9 / float64(emissionInterval(cfg.Rate)) // the rate GCRA really enforces
	}
	var sum float64
	low := math.Inf(1)
	for _, ev := range evs {
		if !s.step(ev.now, ev.cost).Allowed {
			continue
		}
		sec := float64(ev.now-t0.UnixNano()) / 1e9
		low = min(low, sum-rate*sec)
		sum += float64(ev.cost)
		if excess := sum - rate*sec - low; excess > float64(cfg.Burst)+1e-6 {
			t.Fatalf("%+v: %.9f units in a span ending at %d, over burst + rate×T by %.9f", cfg, excess, ev.now, excess-float64(cfg.Burst))
		}
	}
}

func TestBucketNeverExceedsBurstPlusRate(t *testing.T) {
	for _, mode := range []Mode{TokenBucketMode, GCRAMode} {
		for seed := uint64(1); seed <= 20; seed++ {
			cfg := traceConfig(mode, byte(seed), byte(seed*5))
			checkBucketSpan(t, cfg, randomTrace(seed, 3000, []int64{1, 1e5, 1e7, 1e8}[seed%4], cfg.Burst))
		}
	}
}

func FuzzBucketSpan(f *testing.F) {
	f.Add(byte(0), byte(2), byte(9), []byte{0, 0, 0, 0, 9, 1, 0, 0})
	f.Add(byte(1), byte(7), byte(1), []byte{255, 0, 1, 0})
	f.Fuzz(func(t *testing.T, m, a, b byte, data []byte) {
		cfg := traceConfig([]Mode{TokenBucketMode, GCRAMode}[m%2], a, b)
		checkBucketSpan(t, cfg, traceFrom(data, []int64{1, 1e6, 1e8}[int(m/2)%3], cfg.Burst))
	})
}

// TestGCRAAgreesWithTokenBucket: with the same rate and burst, the leaky
// bucket as a meter and the token bucket make the same decisions, with the
// same Remaining, on long random traces at nanosecond-random instants. Rates
// are those whose interval is a whole number of nanoseconds (otherwise GCRA
// rounds it, by design). RetryAfter may differ by 1 ns: x/time/rate's
// arithmetic admits a deficit worth under 1 ns.
func TestGCRAAgreesWithTokenBucket(t *testing.T) {
	for seed := uint64(1); seed <= 16; seed++ {
		x := xorshift(seed * 0x9E3779B97F4A7C15)
		rate := []float64{0.5, 1, 2, 4, 5, 10, 25, 1000}[x.intn(8)]
		burst := 1 + x.intn(30)
		tb := newStepper(t, Config{Mode: TokenBucketMode, Rate: rate, Burst: burst})
		g := newStepper(t, Config{Mode: GCRAMode, Rate: rate, Burst: burst})
		now := t0.UnixNano()
		mean := int64(2e9 / rate / float64(1+x.intn(4)))
		for i := range 20000 {
			now += int64(x.next() % uint64(mean))
			cost := 1
			if x.intn(5) == 0 {
				cost = 1 + x.intn(burst)
			}
			a, b := tb.step(now, cost), g.step(now, cost)
			if a.Allowed != b.Allowed || a.Remaining != b.Remaining || absDur(a.RetryAfter-b.RetryAfter) > 1 {
				t.Fatalf("rate %g burst %d event %d at %d cost %d: token bucket %+v, gcra %+v", rate, burst, i, now, cost, a, b)
			}
		}
	}
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
