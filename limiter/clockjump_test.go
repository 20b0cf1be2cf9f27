package limiter

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestWallClockStepsBack: a caller whose instants come from a wall clock
// that steps back (NTP, a VM restore) gets no extra admissions from the
// step. For every algorithm, a trace with random backward steps of up to an
// hour admits no more than the same requests at the latest instant seen so
// far — the clock as a monotonic one would have read it — and never admits
// at an instant where that monotonic run rejects. (A step back of an hour
// simply admits nothing until the clock has caught up; see the probe in
// TestWallClockStepsBackAnHour.)
func TestWallClockStepsBack(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, cfg := range []Config{
		{Mode: TokenBucketMode, Rate: 5, Burst: 10},
		{Mode: GCRAMode, Rate: 5, Burst: 10},
		{Mode: FixedWindowMode, Limit: 10, Window: 2 * time.Second},
		{Mode: SlidingCounterMode, Limit: 10, Window: 2 * time.Second},
		{Mode: SlidingLogMode, Limit: 10, Window: 2 * time.Second},
	} {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(len(cfg.Mode))))
			jumpy, err := NewKeyed(cfg)
			if err != nil {
				t.Fatal(err)
			}
			mono, _ := NewKeyed(cfg)
			wall, latest := t0, t0
			gotJumpy, gotMono, steps := 0, 0, 0
			for range 20000 {
				wall = wall.Add(time.Duration(rng.IntN(50)) * time.Millisecond)
				if rng.IntN(200) == 0 { // steps short enough that the trace catches up
					wall = wall.Add(-time.Duration(rng.Int64N(int64(5 * time.Second))))
					steps++
				}
				if wall.After(latest) {
					latest = wall
				}
				a, _ := jumpy.AllowAt("k", wall, 1)
				b, _ := mono.AllowAt("k", latest, 1)
				if a.Allowed {
					gotJumpy++
				}
				if b.Allowed {
					gotMono++
				}
				if a.Allowed && !b.Allowed {
					t.Fatalf("admitted at a stepped-back instant %s where the monotonic clock (%s) rejects", wall, latest)
				}
			}
			if steps == 0 {
				t.Fatal("the trace stepped back no time: the test tests nothing")
			}
			if gotJumpy > gotMono {
				t.Errorf("%d admitted with %d steps back, %d on a monotonic clock", gotJumpy, steps, gotMono)
			}
			t.Logf("%d steps back: %d admitted (monotonic clock: %d)", steps, gotJumpy, gotMono)
		})
	}
}

// TestWallClockStepsBackAnHour: right after a one-hour step back no
// algorithm admits anything it had refused, and one second past the old
// latest instant each admits what a second of its rate or window allows.
func TestWallClockStepsBackAnHour(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 30, 0, time.UTC)
	for _, cfg := range []Config{
		{Mode: TokenBucketMode, Rate: 1, Burst: 10},
		{Mode: GCRAMode, Rate: 1, Burst: 10},
		{Mode: FixedWindowMode, Limit: 10, Window: time.Minute},
		{Mode: SlidingCounterMode, Limit: 10, Window: time.Minute},
		{Mode: SlidingLogMode, Limit: 10, Window: time.Minute},
	} {
		k, err := NewKeyed(cfg)
		if err != nil {
			t.Fatal(err)
		}
		count := func(at time.Time) (n int) {
			for range 20 {
				if d, _ := k.AllowAt("a", at, 1); d.Allowed {
					n++
				}
			}
			return n
		}
		if n := count(t0); n != 10 {
			t.Fatalf("%s: %d admitted at t0, want 10", cfg.Mode, n)
		}
		if n := count(t0.Add(-time.Hour)); n != 0 {
			t.Errorf("%s: %d admitted after the clock stepped back an hour, want 0", cfg.Mode, n)
		}
		want := 0 // the windows still hold t0's 10 a second later
		if cfg.Mode == TokenBucketMode || cfg.Mode == GCRAMode {
			want = 1 // one second of refill at 1/s
		}
		if n := count(t0.Add(time.Second)); n != want {
			t.Errorf("%s: %d admitted at t0+1s after the step, want %d", cfg.Mode, n, want)
		}
	}
}
