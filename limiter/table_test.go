package limiter

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentTableChanges races decisions against every structural
// change of the table (growth, forgetting fresh keys with backward-shift
// deletes, Sweep's shrinking resize); run with -race. Tracked
// keys are decided at t0 and never become fresh there, churn keys at an
// earlier instant from which t0 makes them fresh, so inserts of tracked keys
// and Sweep(t0) keep deleting churn keys and moving tracked keys' slots.
// Each worker refunds its first admission of each tracked key. A tracked
// key must end with exactly its limit admitted and not refunded: a state
// update lost to a concurrent move, or a state moved while being updated,
// shows as more or less.
func TestConcurrentTableChanges(t *testing.T) {
	for _, mode := range Modes {
		t.Run(string(mode), func(t *testing.T) { testConcurrentTableChanges(t, mode) })
	}
}

func testConcurrentTableChanges(t *testing.T, mode Mode) {
	// One shard (MaxKeys < 2048), so every change hits the keys
	// being decided.
	cfg := Config{Mode: mode, Rate: 1, Burst: 5, Limit: 5, Window: time.Hour, MaxKeys: 2000}
	k, err := NewKeyed(cfg)
	must(t, err)
	const workers, tracked, churn, rounds = 4, 400, 1000, 3
	early := t0.Add(-3 * time.Hour)
	var admitted [tracked]atomic.Int32
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var refunded [tracked]bool
			for r := range rounds {
				for i := range tracked + churn {
					j := (i*7 + w*131 + r*17) % (tracked + churn)
					if j >= tracked {
						k.AllowAt("churn-"+strconv.Itoa(j+r*churn), early, 1)
						continue
					}
					for range 3 {
						key := "k" + strconv.Itoa(j)
						if d, _ := k.AllowAt(key, t0, 1); d.Allowed {
							admitted[j].Add(1)
							if !refunded[j] { // once per worker and key
								refunded[j] = true
								k.Refund(key, t0, 1)
								admitted[j].Add(-1)
							}
						}
					}
					if i%97 == 0 {
						k.Sweep(t0)
					}
				}
			}
		}()
	}
	wg.Wait()
	for key := range admitted {
		if n := admitted[key].Load(); n != 5 {
			t.Fatalf("key %d admitted %d net of refunds at one instant, want exactly 5", key, n)
		}
	}
	if n := k.Len(); n > cfg.MaxKeys {
		t.Fatalf("Len %d > MaxKeys %d", n, cfg.MaxKeys)
	}
	if st := k.Stats(); st.Forgotten == 0 {
		t.Fatalf("no key was forgotten (%+v): the test moved no slot", st)
	}
}

// TestConcurrentEviction races decisions against eviction at the cap; run
// with -race. Evicted keys are forgiven, so only the cap is checked.
func TestConcurrentEviction(t *testing.T) {
	for _, mode := range Modes {
		t.Run(string(mode), func(t *testing.T) {
			cfg := Config{Mode: mode, Rate: 1, Burst: 5, Limit: 5, Window: time.Hour, MaxKeys: 300}
			k, err := NewKeyed(cfg)
			must(t, err)
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 5000 {
						k.AllowAt("k"+strconv.Itoa((i*13+w*7)%1000), t0.Add(time.Duration(i)*time.Millisecond), 1)
					}
				}()
			}
			wg.Wait()
			if n := k.Len(); n > cfg.MaxKeys {
				t.Fatalf("Len %d > MaxKeys %d", n, cfg.MaxKeys)
			}
			if st := k.Stats(); st.CapHits == 0 {
				t.Fatalf("no cap hit (%+v): the test evicted nothing", st)
			}
		})
	}
}

// TestHotKey races decisions and refunds on one key from every worker
// against new keys, growth and Sweep; run with -race. The key must end with
// exactly its limit admitted net of refunds.
func TestHotKey(t *testing.T) {
	for _, mode := range Modes {
		t.Run(string(mode), func(t *testing.T) {
			const limit = 2000
			cfg := Config{Mode: mode, Rate: 1, Burst: limit, Limit: limit, Window: time.Hour, MaxKeys: 2000}
			k, err := NewKeyed(cfg)
			must(t, err)
			var admitted atomic.Int32
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 1500 {
						if d, _ := k.AllowAt("hot", t0, 1); d.Allowed {
							admitted.Add(1)
							if i%10 == 0 {
								k.Refund("hot", t0, 1)
								admitted.Add(-1)
							}
						}
						if i%5 == 0 {
							k.AllowAt("other-"+strconv.Itoa(w*10000+i), t0.Add(-3*time.Hour), 1)
						}
						if i%300 == 0 {
							k.Sweep(t0)
						}
					}
				}()
			}
			wg.Wait()
			if n := admitted.Load(); n != limit {
				t.Fatalf("admitted %d net of refunds at one instant, want exactly %d", n, limit)
			}
		})
	}
}
