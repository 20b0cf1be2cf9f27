package limiter

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentTableChanges races lock-free decisions against every
// structural change of the table (growth, forgetting fresh keys with
// backward-shift deletes, Sweep's shrinking resize); run with -race. Tracked
// keys are decided at t0 and never become fresh there, churn keys at an
// earlier instant from which t0 makes them fresh, so inserts of tracked keys
// and Sweep(t0) keep deleting churn keys and moving tracked keys' slots.
// Each worker refunds its first admission of each tracked key (Refund locks
// the slot as decisions do). A tracked key must end with exactly its limit
// admitted and not refunded: a state update lost to a concurrent move, or a
// state moved while being updated, shows as more or less.
//
// Both lock-free lookups are raced: findNear (a table this small uses it)
// and find (forced with nearMax 0, as in tables too large for cache).
func TestConcurrentTableChanges(t *testing.T) {
	for _, mode := range Modes {
		for _, near := range []bool{true, false} {
			t.Run(string(mode)+"/near="+strconv.FormatBool(near), func(t *testing.T) {
				testConcurrentTableChanges(t, mode, near)
			})
		}
	}
}

func testConcurrentTableChanges(t *testing.T, mode Mode, near bool) {
	// One shard (MaxKeys < 2048), so every change hits the keys
	// being decided.
	cfg := Config{Mode: mode, Rate: 1, Burst: 5, Limit: 5, Window: time.Hour, MaxKeys: 2000}
	k, err := NewKeyed(cfg)
	must(t, err)
	if !near {
		k.probe().setNearMax(0)
	}
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

// tableProbe reaches into a Keyed's table whatever its state type: the
// methods below are declared in this test file on every keyedTable, so a
// test needs no switch over the rule kinds.
type tableProbe interface {
	markContended(h uint64)
	setNearMax(n int)
	slotWord(h uint64) uint64
}

func (k *Keyed) probe() tableProbe { return k.impl.(tableProbe) }

// markContended marks h's slot contended, as a decision that found it
// locked does, so that the mutex path is exercised whatever the scheduling.
func (t *keyedTable[S, R]) markContended(h uint64) {
	sh := t.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slots := sh.table()
	if i, w := find(slots, h); w != 0 {
		w = lockSlot(&slots[i]) // w may have been locked: take the word unlocked
		release(&slots[i], w|contended)
	}
}

// setNearMax sets every shard's nearMax (n 0: every lookup uses find).
func (t *keyedTable[S, R]) setNearMax(n int) {
	for i := range t.shards {
		t.shards[i].nearMax = n
	}
}

// slotWord returns the hash word of h's slot, or 0.
func (t *keyedTable[S, R]) slotWord(h uint64) uint64 {
	sh := t.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	_, w := find(sh.table(), h)
	return w
}

// TestHotKey races decisions and refunds on one key, marked contended so
// that they take the shard mutex, against lock-free decisions that locked
// the slot before the mark, new keys, growth and Sweep; run with -race. The
// key must end with exactly its limit admitted net of refunds.
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
						if w == 0 && i == 50 {
							k.probe().markContended(k.hash("hot"))
						}
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
			h := k.hash("hot")
			w := k.probe().slotWord(h)
			if w != h|contended {
				t.Fatalf("hot key's word %#x, want its hash %#x marked contended and unlocked", w, h)
			}
		})
	}
}

// TestFindNearMatchesFind: in a table at rest (no delete in progress) the
// branch-free lookup finds what the probe loop finds, for keys at their
// home, past it, past the end of the table (the run wraps) and absent, with
// slots locked or marked, at loads up to 90 %.
func TestFindNearMatchesFind(t *testing.T) {
	x := xorshift(3)
	for _, n := range []int{8, 9, 13, 64, 301} {
		for _, load := range []int{30, 64, 80, 90} {
			slots := make([]slot[TokenBucketState], n)
			var stored []uint64
			for len(stored)*100 < n*load && len(stored) < n-1 { // find needs an empty slot
				h := keyHash(x.next())
				i, w := find(slots, h)
				if w != 0 {
					continue
				}
				slots[i].w.Store(h | x.next()%4) // unlocked, locked, contended or both
				stored = append(stored, h)
			}
			for _, h := range append(stored, keyHash(x.next()), keyHash(x.next())) {
				i, w := find(slots, h)
				j, v := findNear(slots, h)
				if w == 0 {
					i = -1 // absent: find returns the empty slot where h would go
				}
				if v == 0 {
					j = -1
				}
				if i != j || w != v {
					t.Fatalf("len %d load %d%% hash %#x: findNear %d %#x, find %d %#x", n, load, h, j, v, i, w)
				}
			}
		}
	}
}
