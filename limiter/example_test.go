package limiter_test

import (
	"fmt"
	"time"

	"github.com/shaperd/shaper/limiter"
)

// A token bucket of 10 refilled at 2 per second: a burst of 10, then the
// 11th request is told to come back in 500 ms (1 s in a Retry-After header).
func ExampleKeyed() {
	k, err := limiter.NewKeyed(limiter.Config{Mode: limiter.TokenBucketMode, Rate: 2, Burst: 10})
	if err != nil {
		panic(err)
	}
	start := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	for range 10 {
		_, _ = k.AllowAt("api-key-123", start, 1)
	}
	d, _ := k.AllowAt("api-key-123", start, 1)
	fmt.Println(d.Allowed, d.RetryAfter, d.RetryAfterSeconds())

	admitted := 0
	for range 10 {
		if d, _ := k.AllowAt("api-key-123", start.Add(3*time.Second), 1); d.Allowed {
			admitted++
		}
	}
	fmt.Println("at t=3s:", admitted)
	// Output:
	// false 500ms 1
	// at t=3s: 6
}

// A fixed window lets 100 through at 12:00:59 and 100 more at 12:01:00; the
// sliding window counter rejects the second batch.
func ExampleKeyed_boundaryBurst() {
	for _, mode := range []limiter.Mode{limiter.FixedWindowMode, limiter.SlidingCounterMode} {
		k, _ := limiter.NewKeyed(limiter.Config{Mode: mode, Limit: 100, Window: time.Minute})
		admitted := 0
		for _, at := range []string{"2026-01-05T12:00:59Z", "2026-01-05T12:01:00Z"} {
			now, _ := time.Parse(time.RFC3339, at)
			for range 100 {
				if d, _ := k.AllowAt("client", now, 1); d.Allowed {
					admitted++
				}
			}
		}
		fmt.Println(mode, admitted)
	}
	// Output:
	// fixed_window 200
	// sliding_counter 100
}

// Sweep forgets keys whose state is back to that of a new key.
func ExampleKeyed_Sweep() {
	k, _ := limiter.NewKeyed(limiter.Config{Mode: limiter.GCRAMode, Rate: 1, Burst: 5})
	start := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	_, _ = k.AllowAt("a", start, 5)
	_, _ = k.AllowAt("b", start, 1)
	fmt.Println(k.Len(), k.Sweep(start.Add(time.Second)), k.Len())
	// Output: 2 1 1
}

// The pure rule: state in, decision and new state out, times in Unix
// nanoseconds, as a shared store (NATS KV, Redis) would keep them.
func ExampleSlidingCounter_Decide() {
	r, _ := limiter.NewSlidingCounter(100, time.Minute)
	minute := time.Date(2026, 1, 5, 12, 1, 0, 0, time.UTC).UnixNano()
	s := limiter.SlidingCounterState{Start: minute, Prev: 84, Curr: 36}
	now := minute + int64(15*time.Second) // 84×45/60 + 36 = 99
	d, s, _ := r.Decide(s, now, 1)
	fmt.Println(d.Allowed, s.Curr)
	d, _, _ = r.Decide(s, now, 1)
	fmt.Println(d.Allowed, d.RetryAfter)
	// Output:
	// true 37
	// false 714.285715ms
}

func ExampleGCRA_Decide() {
	r, _ := limiter.NewGCRA(2, 10)
	now := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC).UnixNano()
	s := r.Fresh(now)
	d, s, _ := r.Decide(s, now, 10)
	fmt.Println(d.Allowed, d.Remaining, s.TAT-now)
	d, _, _ = r.Decide(s, now, 1)
	fmt.Println(d.Allowed, d.RetryAfter)
	// Output:
	// true 0 5000000000
	// false 500ms
}

func ExampleLimiter() {
	l, _ := limiter.NewLimiter(limiter.Config{Mode: limiter.SlidingLogMode, Limit: 2, Window: time.Second})
	start := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	for _, ms := range []int{0, 300, 600, 1000, 1300} {
		d, _ := l.AllowAt(start.Add(time.Duration(ms)*time.Millisecond), 1)
		fmt.Println(ms, d.Allowed, d.RetryAfter)
	}
	// Output:
	// 0 true 0s
	// 300 true 0s
	// 600 false 400ms
	// 1000 true 0s
	// 1300 true 0s
}

func ExampleDecision_RetryAfterSeconds() {
	d := limiter.Decision{RetryAfter: 500 * time.Millisecond}
	fmt.Println(d.RetryAfterSeconds())
	// Output: 1
}
