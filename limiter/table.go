package limiter

import (
	"math/bits"
	"sync"
)

// The table is an open-addressing hash table with linear probing and
// backward-shift deletion (no tombstones), one per shard. A slot holds the
// key's 64-bit hash and its state inline: no key string, no pointer, no
// per-key allocation. At 80 % load it first forgets fresh keys, then grows
// by 1.5×; Sweep shrinks it below 20 %. So between growths its load stays in
// 53–80 % and a 24-byte slot costs 30–45 bytes per key.
const (
	maxLoadNum, maxLoadDen = 4, 5
	minTableLen            = 8
	// evictSample is how many occupied slots are examined for the stalest
	// state when a shard is at its cap.
	evictSample = 16
)

type slot[S any] struct {
	h uint64 // 0 marks an empty slot; key hashes are never 0
	s S
}

// shard is one lock's worth of keys. The fields after mu are guarded by mu.
type shard[S any, R rule[S]] struct {
	mu    sync.Mutex
	slots []slot[S]
	n     int // occupied slots
	cap   int // most keys this shard may hold
	// Counters, read by Stats.
	capHits, evictions, forgotten uint64
	// atCap counts inserts that found the shard full; a full sweep runs at
	// most once per cap/8 of them (nextSweep), so it stays O(1) amortized.
	atCap, nextSweep uint64
	_                [40]byte // 128 bytes: neighbouring shards' locks stay off this cache line
}

// home returns h's preferred slot in a table of length n (Lemire's
// multiply-shift range reduction on a remixed hash, because the top bits of h
// chose the shard and are the same for every key in it).
func home(h uint64, n int) int {
	hi, _ := bits.Mul64(h*0x9E3779B97F4A7C15, uint64(n))
	return int(hi)
}

// find returns the slot holding h, or the empty slot where it would go.
// find requires that sh.mu is held and the table is not empty (newKeyedTable
// sizes every shard's table).
func (sh *shard[S, R]) find(h uint64) (int, bool) {
	n := len(sh.slots)
	i := home(h, n)
	for {
		switch sh.slots[i].h {
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

// insert adds h with a fresh state and returns its slot, making room first:
// at the cap by dropping the sampled state that becomes fresh soonest, else
// by growing. insert requires that sh.mu is held.
func (sh *shard[S, R]) insert(r R, h uint64, now int64) int {
	if sh.n < sh.cap && (sh.n+1)*maxLoadDen > len(sh.slots)*maxLoadNum {
		// Before growing, forget the fresh keys: memory follows active
		// keys even if Sweep is never called. Grow anyway unless that freed
		// an eighth, so each full scan is paid for by growth or by the
		// inserts that refill what it freed (O(1) amortized per insert).
		if freed := sh.sweep(r, now, false); freed*8 < sh.n+freed {
			sh.resize(min(len(sh.slots)+len(sh.slots)/2, sh.cap*maxLoadDen/maxLoadNum+2))
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
	i, _ := sh.find(h)
	sh.slots[i].h = h
	r.init(&sh.slots[i].s, now)
	sh.n++
	return i
}

// makeRoom drops one key: the one, among evictSample occupied slots from a
// position chosen by h, whose state becomes indistinguishable from fresh
// first. Losing it costs the least: that key is forgiven at most the debt it
// still had. makeRoom requires that sh.mu is held.
func (sh *shard[S, R]) makeRoom(r R, h uint64, now int64) {
	sh.capHits++
	n := len(sh.slots)
	i := home(bits.RotateLeft64(h, 32), n)
	victim, best := -1, int64(0)
	for seen, probes := 0, 0; seen < evictSample && probes < n; probes++ {
		if sh.slots[i].h != 0 {
			if at := r.freshAt(&sh.slots[i].s); victim < 0 || at < best {
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
	if r.isFresh(&sh.slots[victim].s, now) {
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
	for i := 0; i < len(sh.slots); {
		if sl := &sh.slots[i]; sl.h != 0 && r.isFresh(&sl.s, now) {
			sh.delete(i) // may shift a later entry into i: look again
			dropped++
			continue
		}
		i++
	}
	sh.forgotten += uint64(dropped)
	if shrink && len(sh.slots) > minTableLen && sh.n*5 < len(sh.slots) {
		sh.resize(max(minTableLen, sh.n*2))
	}
	return dropped
}

// delete empties slot i, shifting later entries of its probe run back so
// that lookups never meet a gap. delete requires that sh.mu is held.
func (sh *shard[S, R]) delete(i int) {
	n := len(sh.slots)
	for j := i; ; {
		if j++; j == n {
			j = 0
		}
		if sh.slots[j].h == 0 {
			break
		}
		k := home(sh.slots[j].h, n)
		// The entry at j may stay if its home lies cyclically in (i, j].
		if i <= j {
			if i < k && k <= j {
				continue
			}
		} else if i < k || k <= j {
			continue
		}
		sh.slots[i] = sh.slots[j]
		i = j
	}
	sh.slots[i] = slot[S]{}
	sh.n--
}

// resize rehashes into a table of n slots. resize requires that sh.mu is held.
func (sh *shard[S, R]) resize(n int) {
	old := sh.slots
	sh.slots = make([]slot[S], n)
	for _, sl := range old {
		if sl.h != 0 {
			i, _ := sh.find(sl.h)
			sh.slots[i] = sl
		}
	}
}
