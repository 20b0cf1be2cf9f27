package limiter

import (
	"math/bits"
	"sync"
)

// The table is an open-addressing hash table with linear probing and
// backward-shift deletion (no tombstones), one per shard. A slot holds the
// key's hash and its state inline: no key string, no pointer, no per-key
// allocation. At 80 % load it first forgets fresh keys, then grows by 1.5×;
// Sweep shrinks it below 20 %. So between growths its load stays in 53–80 %
// and a 24-byte slot costs 30–45 bytes per key.
//
// Concurrency. Each shard is one sync.Mutex and the table it guards: a
// decision locks its key's shard, finds or inserts the key, decides and
// unlocks; so do Refund, Sweep and Stats. Nothing is read or written
// outside the mutex, so the race detector checks exactly the code that
// production runs. Decisions on keys of different shards share no lock;
// each shard sits on cache lines of its own, so they share no written
// memory either.
const (
	maxLoadNum, maxLoadDen = 4, 5
	minTableLen            = 8
	// evictSample is how many occupied slots are examined for the stalest
	// state when a shard is at its cap.
	evictSample = 16
)

type slot[S any] struct {
	h uint64 // the key's stored hash (never 0, see keyHash); 0 marks an empty slot
	s S
}

// shard is one mutex's worth of keys.
type shard[S any, R rule[S]] struct {
	mu sync.Mutex
	// The fields below are guarded by mu.
	slots []slot[S] // never empty (newKeyedTable sizes it), so find ends
	n     int       // occupied slots
	cap   int       // most keys this shard may hold
	// Counters, read by Stats.
	capHits, evictions, forgotten uint64
	// atCap counts inserts that found the shard full; a full sweep runs at
	// most once per cap/8 of them (nextSweep), so it stays O(1) amortized.
	atCap, nextSweep uint64
	// Pads the shard (88 bytes on 64-bit platforms) to two cache lines, so
	// that a decision writing one shard's mutex does not take the line
	// holding a neighbouring shard's away from another core.
	_ [40]byte
}

// keyHash maps a key's 64-bit hash to a stored key hash: not 0, which marks
// an empty slot.
func keyHash(h uint64) uint64 {
	if h == 0 {
		h = 1
	}
	return h
}

// home returns h's preferred slot in a table of length n (Lemire's
// multiply-shift range reduction on a remixed hash, because the top bits of h
// chose the shard and are the same for every key in it).
func home(h uint64, n int) int {
	hi, _ := bits.Mul64(h*0x9E3779B97F4A7C15, uint64(n))
	return int(hi)
}

// find returns the index of the slot of slots holding h and true, or of the
// empty slot where h would go and false. slots must have an empty slot.
func find[S any](slots []slot[S], h uint64) (int, bool) {
	n := len(slots)
	i := home(h, n)
	for {
		switch slots[i].h {
		case h:
			return i, true
		case 0:
			return i, false
		}
		if i++; i == n {
			i = 0
		}
	}
}

// state returns h's state, inserting h with a fresh state at now if it is
// not stored. The pointer is valid until sh.mu is unlocked. state requires
// that sh.mu is held.
func (sh *shard[S, R]) state(r R, h uint64, now int64) *S {
	if i, ok := find(sh.slots, h); ok {
		return &sh.slots[i].s
	}
	return sh.insert(r, h, now)
}

// stored returns h's state, or nil if h is not stored. The pointer is valid
// until sh.mu is unlocked. stored requires that sh.mu is held.
func (sh *shard[S, R]) stored(h uint64) *S {
	if i, ok := find(sh.slots, h); ok {
		return &sh.slots[i].s
	}
	return nil
}

// insert adds h with a fresh state and returns the state, making room
// first: at the cap by dropping the sampled state that becomes fresh
// soonest, else by growing. insert requires that sh.mu is held.
func (sh *shard[S, R]) insert(r R, h uint64, now int64) *S {
	grow := sh.n < sh.cap && (sh.n+1)*maxLoadDen > len(sh.slots)*maxLoadNum
	if grow || sh.n >= sh.cap {
		sh.makeSpace(r, h, now, grow)
	}
	i, _ := find(sh.slots, h)
	sl := &sh.slots[i]
	sl.h = h
	r.init(&sl.s, now)
	sh.n++
	return &sl.s
}

// makeSpace is insert's structural part. It requires that sh.mu is held.
func (sh *shard[S, R]) makeSpace(r R, h uint64, now int64, grow bool) {
	if grow {
		// Before growing, forget the fresh keys: memory follows active
		// keys even if Sweep is never called. Grow anyway unless that freed
		// an eighth, so each full scan is paid for by growth or by the
		// inserts that refill what it freed (O(1) amortized per insert).
		if freed := sh.sweep(r, now, false); freed*8 < sh.n+freed {
			n := len(sh.slots)
			sh.resize(min(n+n/2, sh.cap*maxLoadDen/maxLoadNum+2))
		}
	}
	if sh.n >= sh.cap {
		// At the cap, forget fresh keys first: only if every key is live
		// does a new key cost a live state.
		if sh.atCap++; sh.atCap > sh.nextSweep {
			sh.sweep(r, now, false)
			sh.nextSweep = sh.atCap + uint64(max(1, sh.cap/8))
		}
		if sh.n >= sh.cap {
			sh.makeRoom(r, h, now)
		}
	}
}

// makeRoom drops one key: the one, among evictSample occupied slots from a
// position chosen by h, whose state becomes indistinguishable from fresh
// first. Losing it costs the least: that key is forgiven at most the debt it
// still had. makeRoom requires that sh.mu is held.
func (sh *shard[S, R]) makeRoom(r R, h uint64, now int64) {
	sh.capHits++
	slots := sh.slots
	n := len(slots)
	i := home(bits.RotateLeft64(h, 32), n)
	victim, best := -1, int64(0)
	for seen, probes := 0, 0; seen < evictSample && probes < n; probes++ {
		if slots[i].h != 0 {
			if at := r.freshAt(&slots[i].s); victim < 0 || at < best {
				victim, best = i, at
			}
			seen++
		}
		if i++; i == n {
			i = 0
		}
	}
	if victim < 0 {
		return // cap 0 cannot happen: every shard's cap is >= 1
	}
	if r.isFresh(&slots[victim].s, now) {
		sh.forgotten++
	} else {
		sh.evictions++
	}
	sh.delete(victim)
}

// sweep forgets every fresh key and returns how many, then, if shrink is
// set, shrinks a sparse table. sweep requires that sh.mu is held.
func (sh *shard[S, R]) sweep(r R, now int64, shrink bool) int {
	dropped := 0
	slots := sh.slots
	for i := 0; i < len(slots); {
		if slots[i].h != 0 && r.isFresh(&slots[i].s, now) {
			sh.delete(i) // may shift a later entry into i: look again
			dropped++
			continue
		}
		i++
	}
	sh.forgotten += uint64(dropped)
	if shrink && len(slots) > minTableLen && sh.n*5 < len(slots) {
		sh.resize(max(minTableLen, sh.n*2))
	}
	return dropped
}

// delete empties slot i, shifting later entries of its probe run back so
// that lookups never meet a gap. delete requires that sh.mu is held.
func (sh *shard[S, R]) delete(i int) {
	slots := sh.slots
	n := len(slots)
	for j := i; ; {
		if j++; j == n {
			j = 0
		}
		h := slots[j].h
		if h == 0 {
			break
		}
		k := home(h, n)
		// The entry at j may stay if its home lies cyclically in (i, j].
		if i <= j {
			if i < k && k <= j {
				continue
			}
		} else if i < k || k <= j {
			continue
		}
		slots[i] = slots[j]
		i = j
	}
	slots[i] = slot[S]{} // also drops a sliding log's ring
	sh.n--
}

// resize rehashes into a new table of n slots. It requires that sh.mu is
// held.
func (sh *shard[S, R]) resize(n int) {
	ns := make([]slot[S], n)
	for _, sl := range sh.slots {
		if sl.h != 0 {
			j, _ := find(ns, sl.h)
			ns[j] = sl
		}
	}
	sh.slots = ns
}
