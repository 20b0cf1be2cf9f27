package limiter

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings of the error; none means valid
	}{
		{"token bucket", Config{Mode: TokenBucketMode, Rate: 2, Burst: 10}, nil},
		{"gcra", Config{Mode: GCRAMode, Rate: 0.5, Burst: 1}, nil},
		{"window ignores rate", Config{Mode: FixedWindowMode, Limit: 100, Window: time.Minute, Rate: -1}, nil},
		{"no mode", Config{}, []string{`Mode must be one of [token_bucket gcra fixed_window sliding_counter sliding_log], got ""`}},
		{"misspelled mode", Config{Mode: "token-bucket"}, []string{`got "token-bucket"`}},
		{"zero rate", Config{Mode: TokenBucketMode, Burst: 1}, []string{"Rate must be > 0 and <= 1e+09 tokens per second for mode token_bucket, got 0"}},
		{"NaN rate", Config{Mode: GCRAMode, Rate: math.NaN(), Burst: 1}, []string{"Rate must be", "got NaN"}},
		{"zero burst", Config{Mode: TokenBucketMode, Rate: 1}, []string{"Burst must be 1..1073741824 for mode token_bucket, got 0"}},
		{"both bad", Config{Mode: GCRAMode, Rate: -1, Burst: -1}, []string{"Rate must be", "Burst must be"}},
		{"endless refill", Config{Mode: TokenBucketMode, Rate: 1e-12, Burst: 1000}, []string{"Burst / Rate must be at most 146 years"}},
		{"zero limit", Config{Mode: SlidingCounterMode, Window: time.Second}, []string{"Limit must be 1..2147483647 for mode sliding_counter, got 0"}},
		{"huge log", Config{Mode: SlidingLogMode, Limit: MaxLogLimit + 1, Window: time.Second}, []string{"Limit must be 1..1048576 for mode sliding_log"}},
		{"zero window", Config{Mode: FixedWindowMode, Limit: 1}, []string{"Window must be > 0 and <= 8784h0m0s for mode fixed_window, got 0s"}},
		{"negative max keys", Config{Mode: GCRAMode, Rate: 1, Burst: 1, MaxKeys: -1}, []string{"MaxKeys must be 0 (default 1048576) or 1..1073741824, got -1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			_, kerr := NewKeyed(tt.cfg)
			if len(tt.want) == 0 {
				if err != nil || kerr != nil {
					t.Fatalf("Validate() = %v, NewKeyed error %v; want valid", err, kerr)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !errors.Is(kerr, ErrInvalidConfig) {
				t.Fatalf("Validate() = %v, want an ErrInvalidConfig", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestForgetFreshKeys: a key is kept exactly while its state differs from a
// new key's, for every algorithm.
func TestForgetFreshKeys(t *testing.T) {
	tests := []struct {
		cfg        Config
		stillLive  time.Duration // after one request at t0, the key must survive a Sweep here
		freshAgain time.Duration // and be forgotten here
	}{
		{Config{Mode: TokenBucketMode, Rate: 2, Burst: 10}, 499 * time.Millisecond, 500 * time.Millisecond},
		{Config{Mode: GCRAMode, Rate: 2, Burst: 10}, 499 * time.Millisecond, 500 * time.Millisecond},
		{Config{Mode: FixedWindowMode, Limit: 5, Window: time.Minute}, time.Minute - 1, time.Minute},
		{Config{Mode: SlidingCounterMode, Limit: 5, Window: time.Minute}, 2*time.Minute - 1, 2 * time.Minute},
		{Config{Mode: SlidingLogMode, Limit: 5, Window: time.Minute}, time.Minute - 1, time.Minute},
	}
	for _, tt := range tests {
		t.Run(string(tt.cfg.Mode), func(t *testing.T) {
			k, err := NewKeyed(tt.cfg)
			must(t, err)
			for i := range 100 {
				_, _ = k.AllowAt("key-"+strconv.Itoa(i), t0, 1)
			}
			if k.Len() != 100 {
				t.Fatalf("Len = %d, want 100", k.Len())
			}
			if n := k.Sweep(t0.Add(tt.stillLive)); n != 0 || k.Len() != 100 {
				t.Fatalf("Sweep at +%s forgot %d (Len %d), want 0: states are still live", tt.stillLive, n, k.Len())
			}
			if n := k.Sweep(t0.Add(tt.freshAgain)); n != 100 || k.Len() != 0 {
				t.Fatalf("Sweep at +%s forgot %d (Len %d), want all 100", tt.freshAgain, n, k.Len())
			}
			if st := k.Stats(); st.Forgotten != 100 || st.CapHits != 0 {
				t.Fatalf("Stats = %+v, want 100 forgotten, no cap hits", st)
			}
		})
	}
}

// TestForgettingWithoutSweep: without any Sweep, a stream of short-lived
// keys does not grow the limiter: a shard forgets its fresh keys before it
// grows. Memory follows the keys live at once (about 100 here), not the
// 100 000 seen.
func TestForgettingWithoutSweep(t *testing.T) {
	for _, mode := range Modes {
		t.Run(string(mode), func(t *testing.T) {
			k, err := NewKeyed(Config{Mode: mode, Rate: 10, Burst: 1, Limit: 1, Window: 100 * time.Millisecond, MaxKeys: 2000})
			must(t, err)
			most := 0
			for i := range 100000 { // a new key every ms; each is fresh 100 ms later
				_, _ = k.AllowAt("once-"+strconv.Itoa(i), t0.Add(time.Duration(i)*time.Millisecond), 1)
				most = max(most, k.Len())
			}
			if most > 250 {
				t.Fatalf("Len reached %d, want about 100 (the live keys) and never near the 100000 seen", most)
			}
			if st := k.Stats(); st.CapHits != 0 || st.Forgotten < 99000 {
				t.Fatalf("Stats = %+v, want no cap hits and ~100000 forgotten", st)
			}
		})
	}
}

func TestCapEvictsStalest(t *testing.T) {
	k, err := NewKeyed(Config{Mode: TokenBucketMode, Rate: 1, Burst: 10, MaxKeys: 4})
	must(t, err)
	// Four keys, drained at different instants: "a" becomes fresh first.
	for i, key := range []string{"a", "b", "c", "d"} {
		_, _ = k.AllowAt(key, t0.Add(time.Duration(i)*time.Second), 10)
	}
	if d, _ := k.AllowAt("e", t0.Add(5*time.Second), 1); !d.Allowed {
		t.Fatalf("new key at the cap: %+v, want admitted (evict, not refuse)", d)
	}
	if st := k.Stats(); st.Keys != 4 || st.CapHits != 1 || st.Evictions != 1 {
		t.Fatalf("Stats = %+v, want 4 keys, 1 cap hit, 1 eviction of live state", st)
	}
	// "a" was evicted: it has a full bucket again; "b" kept its debt.
	if d, _ := k.AllowAt("b", t0.Add(5*time.Second), 10); d.Allowed {
		t.Fatalf("b was evicted instead of the stalest key a: %+v", d)
	}
	if d, _ := k.AllowAt("a", t0.Add(5*time.Second), 10); !d.Allowed {
		t.Fatalf("a should have been evicted and start full: %+v", d)
	}
	// A flood of distinct keys never grows the limiter past its cap.
	for i := range 10000 {
		_, _ = k.AllowAt("flood-"+strconv.Itoa(i), t0.Add(6*time.Second), 1)
		if k.Len() > 4 {
			t.Fatalf("Len = %d > MaxKeys 4", k.Len())
		}
	}
	if st := k.Stats(); st.CapHits < 10000 {
		t.Fatalf("Stats = %+v, want every flood key counted as a cap hit", st)
	}
}

func TestCapLargeNeverExceeded(t *testing.T) {
	const maxKeys = 5000
	k, err := NewKeyed(Config{Mode: SlidingCounterMode, Limit: 10, Window: time.Minute, MaxKeys: maxKeys})
	must(t, err)
	for i := range 3 * maxKeys {
		_, _ = k.AllowAt(strconv.Itoa(i), t0, 1)
	}
	st := k.Stats()
	if st.Keys > maxKeys || st.Keys < maxKeys*95/100 || st.Evictions != uint64(3*maxKeys-st.Keys) {
		t.Fatalf("Stats = %+v, want %d >= Keys >= 95%% of it and every other key evicted", st, maxKeys)
	}
}

// TestConcurrent runs decisions, sweeps and stats from many goroutines; run
// with -race. Each key's admissions must still respect its limit.
func TestConcurrent(t *testing.T) {
	for _, mode := range Modes {
		t.Run(string(mode), func(t *testing.T) {
			cfg := Config{Mode: mode, Rate: 1, Burst: 5, Limit: 5, Window: time.Hour, MaxKeys: 100000}
			k, err := NewKeyed(cfg)
			must(t, err)
			const workers, keys = 8, 50
			var admitted [keys]int
			var mu sync.Mutex
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 500 {
						key := (i*7 + w) % keys
						if d, _ := k.AllowAt("k"+strconv.Itoa(key), t0, 1); d.Allowed {
							mu.Lock()
							admitted[key]++
							mu.Unlock()
						}
						if i%100 == 0 {
							k.Sweep(t0)
							_ = k.Stats()
						}
					}
				}()
			}
			wg.Wait()
			for key, n := range admitted {
				if n != 5 {
					t.Fatalf("key %d admitted %d at one instant, want exactly 5", key, n)
				}
			}
		})
	}
}

// TestMonotonicClock: instants carrying a monotonic reading (time.Now and
// values derived from it) decide exactly as the same instants stripped to
// wall-clock-only; the limiter uses now.Sub, never the wall reading alone.
func TestMonotonicClock(t *testing.T) {
	base := time.Now() // has a monotonic reading
	if base.String() == base.Round(0).String() {
		t.Skip("this platform gives time.Now no monotonic reading")
	}
	for _, mode := range Modes {
		cfg := Config{Mode: mode, Rate: 10, Burst: 5, Limit: 5, Window: 100 * time.Millisecond}
		mono, err := NewKeyed(cfg)
		must(t, err)
		wall, err := NewKeyed(cfg)
		must(t, err)
		x := xorshift(7)
		d := time.Duration(0)
		for i := range 5000 {
			d += time.Duration(x.next() % uint64(30*time.Millisecond))
			a, _ := mono.AllowAt("k", base.Add(d), 1)
			b, _ := wall.AllowAt("k", base.Round(0).Add(d), 1)
			if a != b {
				t.Fatalf("%s event %d: monotonic %+v, wall-only %+v", mode, i, a, b)
			}
		}
	}
}

func TestNoAllocationPerDecision(t *testing.T) {
	for _, mode := range Modes {
		t.Run(string(mode), func(t *testing.T) {
			k, err := NewKeyed(Config{Mode: mode, Rate: 100, Burst: 10, Limit: 100, Window: time.Second})
			must(t, err)
			keys := make([]string, 1000)
			for i := range keys {
				keys[i] = "key-" + strconv.Itoa(i)
			}
			now := t0
			for _, key := range keys { // warm: keys exist, logs at full size
				for j := range 120 {
					_, _ = k.AllowAt(key, now.Add(time.Duration(j)*10*time.Millisecond), 1)
				}
			}
			i := 0
			allocs := testing.AllocsPerRun(10000, func() {
				i++
				_, _ = k.AllowAt(keys[i%len(keys)], now.Add(time.Duration(i)*time.Millisecond), 1)
			})
			if allocs != 0 {
				t.Fatalf("%v allocations per decision on existing keys, want 0", allocs)
			}
			l, err := NewLimiter(k.Config())
			must(t, err)
			_, _ = l.AllowAt(now, 1)
			if allocs := testing.AllocsPerRun(1000, func() { _, _ = l.AllowAt(now, 1) }); allocs != 0 {
				t.Fatalf("Limiter: %v allocations per decision, want 0", allocs)
			}
		})
	}
}

func TestStateBytesPerKey(t *testing.T) {
	// The sliding log's slot: an 8-byte hash, a slice header and two
	// int32s, 40 bytes on 64-bit platforms and 28 on 32-bit ones (where a
	// uint64 needs only 4-byte alignment, so nothing is padded).
	logSlot := 40
	if strconv.IntSize == 32 {
		logSlot = 28
	}
	tests := []struct {
		cfg  Config
		want int
	}{
		{Config{Mode: GCRAMode, Rate: 1, Burst: 1}, 16},
		{Config{Mode: TokenBucketMode, Rate: 1, Burst: 1}, 24},
		{Config{Mode: FixedWindowMode, Limit: 100, Window: time.Minute}, 24},
		{Config{Mode: SlidingCounterMode, Limit: 100, Window: time.Minute}, 24},
		{Config{Mode: SlidingLogMode, Limit: 100, Window: time.Minute}, logSlot + 800},
	}
	for _, tt := range tests {
		k, err := NewKeyed(tt.cfg)
		must(t, err)
		if got := k.StateBytesPerKey(); got != tt.want {
			t.Errorf("%s: StateBytesPerKey = %d, want %d", tt.cfg.Mode, got, tt.want)
		}
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int
	}{{0, 0}, {1, 1}, {500 * time.Millisecond, 1}, {time.Second, 1}, {time.Second + 1, 2}}
	for _, tt := range tests {
		if got := (Decision{RetryAfter: tt.d}).RetryAfterSeconds(); got != tt.want {
			t.Errorf("RetryAfterSeconds(%s) = %d, want %d", tt.d, got, tt.want)
		}
	}
}

// TestKeyedSeeded: two Keyed limiters map the same key to different hashes
// (each draws its own maphash seed), so which keys collide cannot be
// learned from one and used on another.
func TestKeyedSeeded(t *testing.T) {
	cfg := Config{Mode: GCRAMode, Rate: 1, Burst: 1}
	a, err := NewKeyed(cfg)
	must(t, err)
	b, err := NewKeyed(cfg)
	must(t, err)
	for _, key := range []string{"x", "acme", "10.0.0.1", "tenant-0000002a", strings.Repeat("z", 40)} {
		if ha, hb := a.hash(key), b.hash(key); ha == hb {
			t.Errorf("%q: two Keyed limiters gave the same hash %#x", key, ha)
		}
	}
}
