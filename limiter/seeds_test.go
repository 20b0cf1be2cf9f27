package limiter

import (
	"testing"
	"time"
)

// The worked numbers of the seed article, exactly.

func TestSeedTokenBucket(t *testing.T) {
	for _, mode := range []Mode{TokenBucketMode, GCRAMode} {
		t.Run(string(mode), func(t *testing.T) {
			k, err := NewKeyed(Config{Mode: mode, Rate: 2, Burst: 10})
			must(t, err)
			for i := range 10 {
				if d, _ := k.AllowAt("api-key-123", at(0), 1); !d.Allowed || d.Remaining != 9-i {
					t.Fatalf("request %d at t=0: %+v, want allowed with %d remaining", i+1, d, 9-i)
				}
			}
			d, _ := k.AllowAt("api-key-123", at(0), 1)
			if d.Allowed || d.RetryAfter != 500*time.Millisecond || d.RetryAfterSeconds() != 1 {
				t.Fatalf("11th at t=0: %+v (header %d s), want rejected, retry after 500ms (1 s)", d, d.RetryAfterSeconds())
			}
			got := 0
			for range 10 {
				if d, _ := k.AllowAt("api-key-123", at(3*time.Second), 1); d.Allowed {
					got++
				}
			}
			if got != 6 {
				t.Fatalf("at t=3s admitted %d, want exactly 6", got)
			}
		})
	}
}

// TestSeedTokenBucketSpan hammers a bucket every millisecond for two minutes:
// no 60 s span may hold more than 10 + 2×60 = 130 admissions, and the first
// one holds exactly that.
func TestSeedTokenBucketSpan(t *testing.T) {
	for _, mode := range []Mode{TokenBucketMode, GCRAMode} {
		t.Run(string(mode), func(t *testing.T) {
			l, err := NewLimiter(Config{Mode: mode, Rate: 2, Burst: 10})
			must(t, err)
			var admitted []time.Duration
			for d := time.Duration(0); d <= 120*time.Second; d += time.Millisecond {
				if dec, _ := l.AllowAt(at(d), 1); dec.Allowed {
					admitted = append(admitted, d)
				}
			}
			if most := mostInSpan(admitted, 60*time.Second); most != 130 {
				t.Fatalf("most admitted in any closed 60 s span = %d, want 130", most)
			}
		})
	}
}

// mostInSpan returns the most sorted instants inside any closed span [a, a+span].
func mostInSpan(ts []time.Duration, span time.Duration) int {
	most, j := 0, 0
	for i := range ts {
		for ts[i]-ts[j] > span {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

func TestSeedBoundaryBurst(t *testing.T) {
	tests := []struct {
		mode       Mode
		wantSecond int // admitted of the second batch of 100, all at 12:01:00
		wantSpread int // admitted when the batch is spread over 12:01:00–12:01:01.98
	}{
		{FixedWindowMode, 100, 100},
		{SlidingLogMode, 0, 0},
		// The counter's previous-window weight decays by 100/60 per second,
		// so ~2 s into the minute it has room for 3: the estimate is exact
		// about its own rule, and those 3 are its approximation error.
		{SlidingCounterMode, 0, 3},
	}
	for _, tt := range tests {
		for _, spread := range []bool{false, true} {
			name := string(tt.mode) + map[bool]string{false: "/all_at_12:01:00", true: "/spread_over_12:01:00-01"}[spread]
			t.Run(name, func(t *testing.T) {
				k, err := NewKeyed(Config{Mode: tt.mode, Limit: 100, Window: time.Minute})
				must(t, err)
				for i := range 100 {
					if d, _ := k.AllowAt("client", at(59*time.Second), 1); !d.Allowed {
						t.Fatalf("first batch request %d at 12:00:59 rejected: %+v", i+1, d)
					}
				}
				got := 0
				for i := range 100 {
					now := at(60 * time.Second)
					if spread {
						now = now.Add(time.Duration(i) * 20 * time.Millisecond) // 12:01:00.00 … 12:01:01.98
					}
					if d, _ := k.AllowAt("client", now, 1); d.Allowed {
						got++
					}
				}
				want := tt.wantSecond
				if spread {
					want = tt.wantSpread
				}
				if got != want {
					t.Fatalf("second batch admitted %d, want %d", got, want)
				}
			})
		}
	}
}

func TestSeedSlidingCounter(t *testing.T) {
	t.Run("replayed", func(t *testing.T) {
		k, err := NewKeyed(Config{Mode: SlidingCounterMode, Limit: 100, Window: time.Minute})
		must(t, err)
		for i := range 84 { // previous minute
			if d, _ := k.AllowAt("k", at(30*time.Second), 1); !d.Allowed {
				t.Fatalf("previous-minute request %d rejected", i+1)
			}
		}
		for i := range 36 { // so far this minute, 15 s in
			if d, _ := k.AllowAt("k", at(75*time.Second), 1); !d.Allowed {
				t.Fatalf("current-minute request %d rejected: %+v", i+1, d)
			}
		}
		d, _ := k.AllowAt("k", at(75*time.Second), 1)
		if !d.Allowed || d.Remaining != 0 {
			t.Fatalf("estimate 99: next = %+v, want allowed with 0 remaining", d)
		}
		d, _ = k.AllowAt("k", at(75*time.Second), 1)
		// Estimate 100; it drops to 99 once 84×(60−e)/60 <= 62: e >= 15.714285715 s.
		if want := 714285715 * time.Nanosecond; d.Allowed || d.RetryAfter != want {
			t.Fatalf("estimate 100: next = %+v, want rejected, retry after %s", d, want)
		}
	})
	t.Run("pure_state", func(t *testing.T) {
		r, err := NewSlidingCounter(100, time.Minute)
		must(t, err)
		minute := at(60 * time.Second).UnixNano()
		s := SlidingCounterState{Start: minute, Prev: 84, Curr: 36}
		now := minute + int64(15*time.Second)
		d, s, _ := r.Decide(s, now, 1)
		if !d.Allowed {
			t.Fatalf("estimate 99: %+v, want allowed", d)
		}
		if d, _, _ = r.Decide(s, now, 1); d.Allowed {
			t.Fatalf("estimate 100: %+v, want rejected", d)
		}
	})
}
