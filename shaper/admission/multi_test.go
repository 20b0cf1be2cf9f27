package admission

import (
	"errors"
	"testing"
	"time"

	"github.com/shaperd/shaper/limiter"
)

// twoLimits is 2/s with a burst of 2 AND 5 per 10 s (fixed window).
var twoLimits = []limiter.Config{
	{Mode: limiter.TokenBucketMode, Rate: 2, Burst: 2},
	{Mode: limiter.FixedWindowMode, Limit: 5, Window: 10 * time.Second},
}

// TestMultiAdmitterDecision pins how decisions combine, directly.
func TestMultiAdmitterDecision(t *testing.T) {
	adm, err := New(Settings{Lane: "a", Limits: []limiter.Config{
		{Mode: limiter.FixedWindowMode, Limit: 3, Window: time.Minute},
		{Mode: limiter.GCRAMode, Rate: 1, Burst: 2},
		{Mode: limiter.SlidingLogMode, Limit: 10, Window: time.Hour},
	}}, nil, Counters{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	steps := []struct {
		name string
		at   time.Duration
		cost int
		want limiter.Decision
	}{
		{"all admit; least remaining", 0, 1, limiter.Decision{Allowed: true, Remaining: 1}},
		{"gcra rejects; remaining counts the refunded window", 0, 2, limiter.Decision{Remaining: 1, RetryAfter: time.Second}},
		{"nothing was charged", 0, 1, limiter.Decision{Allowed: true, Remaining: 0}},
		{"window (59.5 s) and gcra (1.5 s) reject: the longer wait", 500 * time.Millisecond, 2, limiter.Decision{Remaining: 0, RetryAfter: 59500 * time.Millisecond}},
		{"the window has one", 2 * time.Second, 1, limiter.Decision{Allowed: true, Remaining: 0}},
		{"window full: until the minute", 30 * time.Second, 1, limiter.Decision{Remaining: 0, RetryAfter: 30 * time.Second}},
	}
	for _, st := range steps {
		got, err := adm.AllowAt("k", t0.Add(st.at), st.cost)
		if err != nil || got != st.want {
			t.Fatalf("%s: %+v %v, want %+v", st.name, got, err, st.want)
		}
	}
	// A cost one limit can never admit is an error, and refunds the
	// limits asked before it.
	if _, err := adm.AllowAt("k2", t0, 3); !errors.Is(err, limiter.ErrCostTooLarge) {
		t.Fatalf("cost 3 over gcra burst 2: %v", err)
	}
	if d, _ := adm.AllowAt("k2", t0, 2); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("after the error, k2 should be untouched: %+v", d)
	}
	// The lane status counts keys, not keys × limits.
	if st, ok := adm.Stats(); !ok || st.Keys != 2 {
		t.Fatalf("admission stats %+v %v, want 2 keys (k, k2)", st, ok)
	}
	if _, err := New(Settings{Limits: twoLimits, Store: Store{Kind: "nats"}}, nil, Counters{}); err == nil {
		t.Fatal("a remote store took several limits")
	}
}
