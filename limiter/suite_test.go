package limiter

import (
	"errors"
	"testing"
	"time"
)

// One suite over every implementation of every algorithm: the pure rule, the
// single-key Limiter and the Keyed limiter must step identically.

type step struct {
	name      string
	at        time.Duration // since t0 (12:00:00)
	cost      int
	allowed   bool
	remaining int
	retry     time.Duration
}

var suites = []struct {
	cfg   Config
	steps []step
}{
	{Config{Mode: TokenBucketMode, Rate: 2, Burst: 3}, []step{
		{"fresh key bursts", 0, 2, true, 1, 0},
		{"last token", 0, 1, true, 0, 0},
		{"empty", 0, 1, false, 0, 500 * time.Millisecond},
		{"one token back", 500 * time.Millisecond, 1, true, 0, 0},
		{"cost 3 waits for 3 tokens", 600 * time.Millisecond, 3, false, 0, 1400 * time.Millisecond},
		{"refill caps at burst", time.Hour, 3, true, 0, 0},
	}},
	{Config{Mode: GCRAMode, Rate: 2, Burst: 3}, []step{
		{"fresh key bursts", 0, 2, true, 1, 0},
		{"last token", 0, 1, true, 0, 0},
		{"empty", 0, 1, false, 0, 500 * time.Millisecond},
		{"one token back", 500 * time.Millisecond, 1, true, 0, 0},
		{"cost 3 waits for 3 tokens", 600 * time.Millisecond, 3, false, 0, 1400 * time.Millisecond},
		{"refill caps at burst", time.Hour, 3, true, 0, 0},
	}},
	{Config{Mode: FixedWindowMode, Limit: 3, Window: time.Minute}, []step{
		{"first", 10 * time.Second, 2, true, 1, 0},
		{"fills", 20 * time.Second, 1, true, 0, 0},
		{"full until the minute", 30 * time.Second, 1, false, 0, 30 * time.Second},
		{"new window", time.Minute, 3, true, 0, 0},
		{"too much for what is left", time.Minute + time.Second, 1, false, 0, 59 * time.Second},
	}},
	{Config{Mode: SlidingCounterMode, Limit: 4, Window: time.Minute}, []step{
		{"first", 30 * time.Second, 4, true, 0, 0},
		{"full: room when prev weight drops", 40 * time.Second, 1, false, 0, 35 * time.Second}, // next window, 15 s in: 4×45/60 = 3
		{"15 s into next window", 75 * time.Second, 1, true, 0, 0},
		{"estimate 4", 75 * time.Second, 1, false, 0, 15 * time.Second}, // 4×(60−e)/60 + 1 + 1 <= 4 at e = 30 s
		{"both windows past", 3 * time.Minute, 4, true, 0, 0},
	}},
	{Config{Mode: SlidingLogMode, Limit: 3, Window: time.Minute}, []step{
		{"first", 10 * time.Second, 1, true, 2, 0},
		{"second", 20 * time.Second, 2, true, 0, 0},
		{"full until first expires", 30 * time.Second, 1, false, 0, 40 * time.Second},
		{"cost 2 waits for the second entry", 30 * time.Second, 2, false, 0, 50 * time.Second},
		{"first expired exactly", 70 * time.Second, 1, true, 0, 0},
		{"all expired", 140 * time.Second, 3, true, 0, 0},
	}},
}

func TestSuite(t *testing.T) {
	impls := []struct {
		name string
		make func(t *testing.T, cfg Config) func(now time.Time, cost int) Decision
	}{
		{"pure", func(t *testing.T, cfg Config) func(time.Time, int) Decision {
			s := newStepper(t, cfg)
			return func(now time.Time, cost int) Decision { return s.step(now.UnixNano(), cost) }
		}},
		{"Limiter", func(t *testing.T, cfg Config) func(time.Time, int) Decision {
			l, err := NewLimiter(cfg)
			must(t, err)
			return func(now time.Time, cost int) Decision {
				d, err := l.AllowAt(now, cost)
				must(t, err)
				return d
			}
		}},
		{"Keyed", func(t *testing.T, cfg Config) func(time.Time, int) Decision {
			k, err := NewKeyed(cfg)
			must(t, err)
			return func(now time.Time, cost int) Decision {
				// A second key interleaved must not disturb the first.
				_, _ = k.AllowAt("other", now, 1)
				d, err := k.AllowAt("key", now, cost)
				must(t, err)
				return d
			}
		}},
	}
	for _, su := range suites {
		for _, impl := range impls {
			t.Run(string(su.cfg.Mode)+"/"+impl.name, func(t *testing.T) {
				allow := impl.make(t, su.cfg)
				for _, st := range su.steps {
					got := allow(at(st.at), st.cost)
					want := Decision{Allowed: st.allowed, Remaining: st.remaining, RetryAfter: st.retry}
					if got != want {
						t.Fatalf("step %q at +%s cost %d: got %+v, want %+v", st.name, st.at, st.cost, got, want)
					}
				}
			})
		}
	}
}

func TestCostErrors(t *testing.T) {
	for _, su := range suites {
		cfg := su.cfg
		t.Run(string(cfg.Mode), func(t *testing.T) {
			k, err := NewKeyed(cfg)
			must(t, err)
			l, err := NewLimiter(cfg)
			must(t, err)
			c := capacityOf(cfg)
			tests := []struct {
				name string
				cost int
				want error
			}{
				{"zero", 0, ErrInvalidCost},
				{"negative", -1, ErrInvalidCost},
				{"above capacity", c + 1, ErrCostTooLarge},
			}
			for _, tt := range tests {
				if _, err := k.AllowAt("k", t0, tt.cost); !errors.Is(err, tt.want) {
					t.Errorf("%s: Keyed error %v, want %v", tt.name, err, tt.want)
				}
				if _, err := l.AllowAt(t0, tt.cost); !errors.Is(err, tt.want) {
					t.Errorf("%s: Limiter error %v, want %v", tt.name, err, tt.want)
				}
			}
			if d, err := k.AllowAt("k", t0, c); err != nil || !d.Allowed {
				t.Errorf("cost = capacity %d on a fresh key: %+v %v, want allowed", c, d, err)
			}
			_, err = k.AllowAt("k", t0, c+1)
			if err == nil || !contains(err.Error(), itoa(c+1)) || !contains(err.Error(), itoa(c)) {
				t.Errorf("error %q should give the cost and the capacity", err)
			}
		})
	}
}

// TestKeyedMatchesRule replays a random trace through Keyed and through each
// key's pure rule: every Decision must be equal, on hot keys (partly spent,
// often rejected), cold keys (back when fresh), costs up to the capacity and
// instants out of order. Keyed decides through its own paths (the slot
// table, the inlined common cases admitFull and admitNear); the pure rule is
// the reference.
func TestKeyedMatchesRule(t *testing.T) {
	for _, mode := range Modes {
		cfg := Config{Mode: mode, Rate: 3.3, Burst: 7, Limit: 7, Window: time.Second} // each mode uses its fields
		t.Run(string(cfg.Mode), func(t *testing.T) {
			k, err := NewKeyed(cfg)
			must(t, err)
			rules := map[string]stepper{}
			x := xorshift(99)
			now := t0.UnixNano()
			allowed, rejected := 0, 0
			for i := range 100_000 {
				now += int64(x.next() % uint64(30*time.Millisecond))
				at := now
				if x.intn(30) == 0 { // a request stamped a little earlier
					at -= int64(x.next() % uint64(time.Second))
				}
				key := "k" + itoa(x.intn(40)/(1+x.intn(4))) // skewed: k0 is hot
				cost := 1 + x.intn(2)
				if x.intn(50) == 0 {
					cost = capacityOf(cfg)
				}
				r := rules[key]
				if r == nil {
					r = newStepper(t, cfg)
					rules[key] = r
				}
				want := r.step(at, cost)
				got, err := k.AllowAt(key, time.Unix(0, at), cost)
				must(t, err)
				if got != want {
					t.Fatalf("event %d key %s cost %d at +%s: Keyed %+v, rule %+v", i, key, cost, time.Duration(at-t0.UnixNano()), got, want)
				}
				if got.Allowed {
					allowed++
				} else {
					rejected++
				}
			}
			if allowed < 10_000 || rejected < 10_000 {
				t.Fatalf("%d allowed, %d rejected: the trace should exercise both", allowed, rejected)
			}
		})
	}
}
