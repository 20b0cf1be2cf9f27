package limiter

import (
	"testing"
	"time"
)

// TestRefundUndoesCharge is the meaning of a refund: on random traces, a
// request asked and, if admitted, refunded at the same instant leaves every
// later decision (Allowed, Remaining, RetryAfter) exactly as if it had never
// been asked. Run A asks the probes; run B skips them.
//
// The token bucket is exact in real arithmetic, but its float64 token count
// rounds differently when the refill is split at the probe: a count at a
// whole number may come out 1 ulp to either side of it, so Remaining (its
// floor) may be off by 1 and RetryAfter by 1 ns (TestGCRAAgreesWithTokenBucket
// allows the same nanosecond). Allowed is always identical (admission
// tolerates a deficit worth under 1 ns); the test counts the near-misses.
func TestRefundUndoesCharge(t *testing.T) {
	totalRefunds, totalULPs := map[Mode]int{}, map[Mode]int{}
	defer func() {
		for _, m := range Modes {
			t.Logf("%s: %d refunds, %d later decisions off by float rounding", m, totalRefunds[m], totalULPs[m])
		}
	}()
	for _, mode := range Modes {
		for seed := uint64(1); seed <= 16; seed++ {
			cfg := traceConfig(mode, byte(seed*3), byte(seed*11))
			scale := []int64{1e3, 1e6, 1e7, 1e8}[seed%4]
			evs := randomTrace(seed, 3000, scale, capacityOf(cfg))
			a, err := NewKeyed(cfg)
			must(t, err)
			b, err := NewKeyed(cfg)
			must(t, err)
			x := xorshift(seed*0x9E3779B97F4A7C15 | 1)
			refunds, ulps := 0, 0
			for i, ev := range evs {
				now := time.Unix(0, ev.now).UTC()
				if x.intn(3) == 0 { // a probe: only A sees it
					d, err := a.AllowAt("k", now, ev.cost)
					must(t, err)
					if d.Allowed {
						a.Refund("k", now, ev.cost)
						refunds++
					}
					continue
				}
				da, err := a.AllowAt("k", now, ev.cost)
				must(t, err)
				db, err := b.AllowAt("k", now, ev.cost)
				must(t, err)
				if mode == TokenBucketMode && da != db && da.Allowed == db.Allowed &&
					abs(da.Remaining-db.Remaining) <= 1 && absDur(da.RetryAfter-db.RetryAfter) <= 1 {
					ulps++
					da = db
				}
				if da != db {
					t.Fatalf("%+v seed %d event %d at %d cost %d: with refunded probes %+v, without %+v",
						cfg, seed, i, ev.now, ev.cost, da, db)
				}
			}
			if refunds == 0 {
				t.Fatalf("%+v seed %d: no probe was admitted; the trace tests nothing", cfg, seed)
			}
			if ulps > len(evs)/10 { // a guard; 0.9 % of the compared decisions over all seeds
				t.Errorf("%+v seed %d: %d of %d decisions differ by rounding, want under 10 %%", cfg, seed, ulps, len(evs))
			}
			totalULPs[mode] += ulps
			totalRefunds[mode] += refunds
		}
	}
}

// TestRefundSteps pins each rule's refund on fixed instants, including the
// cases where there is nothing (or less) to give back.
func TestRefundSteps(t *testing.T) {
	type op struct {
		name   string
		at     time.Duration
		cost   int
		refund bool // Refund instead of AllowAt
		want   Decision
	}
	ok := func(rem int) Decision { return Decision{Allowed: true, Remaining: rem} }
	no := func(rem int, retry time.Duration) Decision { return Decision{Remaining: rem, RetryAfter: retry} }
	tests := []struct {
		cfg Config
		ops []op
	}{
		{Config{Mode: TokenBucketMode, Rate: 2, Burst: 3}, []op{
			{"drain", 0, 3, false, ok(0)},
			{"give 2 back", 0, 2, true, Decision{}},
			{"2 there", 0, 2, false, ok(0)},
			{"refund never exceeds burst", 0, 3, true, Decision{}},
			{"refund of a never-charged cost is capped", 0, 3, true, Decision{}},
			{"full, not more", 0, 3, false, ok(0)},
			{"empty", 0, 1, false, no(0, 500*time.Millisecond)},
		}},
		{Config{Mode: GCRAMode, Rate: 2, Burst: 3}, []op{
			{"drain", 0, 3, false, ok(0)},
			{"give 2 back", 0, 2, true, Decision{}},
			{"2 there", 0, 2, false, ok(0)},
			{"TAT never before now", time.Hour, 3, true, Decision{}},
			{"full, not more", time.Hour, 3, false, ok(0)},
			{"empty", time.Hour, 1, false, no(0, 500*time.Millisecond)},
		}},
		{Config{Mode: FixedWindowMode, Limit: 3, Window: time.Minute}, []op{
			{"fill", 10 * time.Second, 3, false, ok(0)},
			{"give 1 back in the window", 20 * time.Second, 1, true, Decision{}},
			{"1 there", 30 * time.Second, 1, false, ok(0)},
			{"full", 30 * time.Second, 1, false, no(0, 30*time.Second)},
			{"refund after the window: nothing", 70 * time.Second, 3, true, Decision{}},
			{"new window untouched", 70 * time.Second, 3, false, ok(0)},
		}},
		{Config{Mode: SlidingCounterMode, Limit: 4, Window: time.Minute}, []op{
			{"fill", 30 * time.Second, 4, false, ok(0)},
			{"give 2 back", 30 * time.Second, 2, true, Decision{}},
			{"2 there", 40 * time.Second, 2, false, ok(0)},
			{"refund in the next window: nothing", 75 * time.Second, 4, true, Decision{}},
			{"prev still weighs 4×45/60", 75 * time.Second, 2, false, no(1, 15*time.Second)},
		}},
		{Config{Mode: SlidingLogMode, Limit: 3, Window: time.Minute}, []op{
			{"first", 10 * time.Second, 1, false, ok(2)},
			{"two more", 20 * time.Second, 2, false, ok(0)},
			{"give 2 back: the newest", 20 * time.Second, 2, true, Decision{}},
			{"room for 2", 25 * time.Second, 2, false, ok(0)},
			{"full until the first expires", 30 * time.Second, 1, false, no(0, 40*time.Second)},
			{"refund skips expired entries", 90 * time.Second, 3, true, Decision{}},
			{"all expired", 90 * time.Second, 3, false, ok(0)},
		}},
	}
	for _, tt := range tests {
		t.Run(string(tt.cfg.Mode), func(t *testing.T) {
			k, err := NewKeyed(tt.cfg)
			must(t, err)
			p := newStepper(t, tt.cfg).(refundStepper)
			for _, o := range tt.ops {
				if o.refund {
					k.Refund("k", at(o.at), o.cost)
					p.refund(at(o.at).UnixNano(), o.cost)
					continue
				}
				got, err := k.AllowAt("k", at(o.at), o.cost)
				must(t, err)
				if got != o.want {
					t.Fatalf("Keyed %q: got %+v, want %+v", o.name, got, o.want)
				}
				if got := p.step(at(o.at).UnixNano(), o.cost); got != o.want {
					t.Fatalf("pure %q: got %+v, want %+v", o.name, got, o.want)
				}
			}
		})
	}
}

func TestRefundUnknownKeyAndBadCost(t *testing.T) {
	k, err := NewKeyed(Config{Mode: FixedWindowMode, Limit: 2, Window: time.Minute})
	must(t, err)
	k.Refund("never-seen", t0, 1)
	if k.Len() != 0 {
		t.Fatalf("a refund stored a key: Len %d", k.Len())
	}
	d, _ := k.AllowAt("k", t0, 2)
	k.Refund("k", t0, 0)
	k.Refund("k", t0, -3)
	if d2, _ := k.AllowAt("k", t0, 1); !d.Allowed || d2.Allowed {
		t.Fatalf("costs below 1 gave something back: %+v %+v", d, d2)
	}
}

func abs(n int) int { return max(n, -n) }

// refundStepper is a stepper over the exported pure Refund methods.
type refundStepper interface {
	stepper
	refund(now int64, cost int)
}

func (p *ruleStepper[S, R]) refund(now int64, cost int) {
	switch s := any(&p.s).(type) {
	case *TokenBucketState:
		*s = any(p.r).(TokenBucket).Refund(*s, now, cost)
	case *GCRAState:
		*s = any(p.r).(GCRA).Refund(*s, now, cost)
	case *FixedWindowState:
		*s = any(p.r).(FixedWindow).Refund(*s, now, cost)
	case *SlidingCounterState:
		*s = any(p.r).(SlidingCounter).Refund(*s, now, cost)
	case *SlidingLogState:
		*s = any(p.r).(SlidingLog).Refund(*s, now, cost)
	}
}
