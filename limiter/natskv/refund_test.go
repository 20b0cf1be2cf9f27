package natskv

import (
	"testing"
	"time"

	"github.com/shaperd/shaper/limiter"
)

// A refund through the bucket gives a charge back as limiter.Keyed.Refund
// does in memory, for every mode, whichever instance refunds: a key
// charged to its limit by one instance, then refunded twice by another,
// admits exactly two more there at the same instant, as the memory
// limiter does.
// Approximate mode gives back what it has not synced yet locally.
func TestRefund(t *testing.T) {
	srv := runServer(t)
	a, b := newStore(t, srv, Settings{}), newStore(t, srv, Settings{})
	cfgs := []limiter.Config{
		{Mode: limiter.TokenBucketMode, Rate: 0.01, Burst: 3},
		{Mode: limiter.GCRAMode, Rate: 0.01, Burst: 3},
		{Mode: limiter.FixedWindowMode, Limit: 3, Window: time.Minute},
		{Mode: limiter.SlidingCounterMode, Limit: 3, Window: time.Minute},
		{Mode: limiter.SlidingLogMode, Limit: 3, Window: time.Minute},
	}
	for _, cfg := range cfgs {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			mem, err := limiter.NewKeyed(cfg)
			if err != nil {
				t.Fatal(err)
			}
			kvA, kvB := newLimiter(t, a, cfg, Options{}), newLimiter(t, b, cfg, Options{})
			key := "refund-" + string(cfg.Mode)
			now := t0.Add(time.Second)
			for range 3 {
				_, _ = mem.AllowAt(key, now, 1)
				if d, err := kvA.AllowAt(key, now, 1); err != nil || !d.Allowed {
					t.Fatalf("charge: %+v %v", d, err)
				}
			}
			mem.Refund(key, now, 1)
			mem.Refund(key, now, 1)
			kvB.Refund(key, now, 1)
			kvB.Refund(key, now, 1)
			for i := range 3 {
				want, _ := mem.AllowAt(key, now, 1)
				got, err := kvB.AllowAt(key, now, 1)
				if err != nil || got.Allowed != want.Allowed || got.Allowed != (i < 2) {
					t.Fatalf("after two refunds, decision %d: kv %+v (%v), memory %+v", i, got, err, want)
				}
			}
		})
	}
	t.Run("approximate", func(t *testing.T) {
		cfg := limiter.Config{Mode: limiter.TokenBucketMode, Rate: 0.01, Burst: 3}
		l := newLimiter(t, a, cfg, Options{Approximate: true})
		now := time.Now()
		for range 3 {
			if d, err := l.AllowAt("approx", now, 1); err != nil || !d.Allowed {
				t.Fatalf("charge: %+v %v", d, err)
			}
		}
		l.Refund("approx", now, 1)
		if d, err := l.AllowAt("approx", now, 1); err != nil || !d.Allowed {
			t.Fatalf("after a refund: %+v %v, want admitted", d, err)
		}
		if d, err := l.AllowAt("approx", now, 1); err != nil || d.Allowed {
			t.Fatalf("then: %+v %v, want refused", d, err)
		}
	})
}
