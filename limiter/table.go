package limiter

import (
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// The table is an open-addressing hash table with linear probing and
// backward-shift deletion (no tombstones), one per shard. A slot holds the
// key's hash and its state inline: no key string, no pointer, no per-key
// allocation. At 80 % load it first forgets fresh keys, then grows by 1.5×;
// Sweep shrinks it below 20 %. So between growths its load stays in 53–80 %
// and a 24-byte slot costs 30–45 bytes per key.
//
// Concurrency. A decision on a stored key writes one cache line, its slot:
// bit 0 of the slot's hash word is the slot's lock, and a decision finds the
// key without the shard mutex, locks the slot with one CAS from exactly the
// key's hash, updates the state and unlocks it. Structural changes (insert's
// sweeping, eviction and growth; delete; resize; Sweep) hold the shard mutex
// and take a slot's lock before they read or move its state, so they wait
// for a decision in progress and a decision cannot start on a slot being
// moved. Two rules make a lock-free lookup that raced a change safe. A
// backward-shift delete publishes a moved key's word at its new slot only
// after copying the state there, and keeps the old slot locked until it is
// overwritten, so at most one unlocked slot holds a key's hash and it holds
// the key's state. A resize leaves every slot of the old table locked for
// good, so a decision that found its key in a table no longer in use fails
// its CAS. A failed CAS, a key not found (perhaps moved past the lookup) or
// a locked slot sends the decision to the shard mutex (acquireSlow), where
// no structural change runs.
//
// A hot key. Two cores spinning on one slot lock pass its cache line back
// and forth on every decision; a mutex that parks the loser lets the winner
// run many decisions on a line it keeps. So a decision that finds its slot
// locked goes to the shard mutex and marks the slot contended (bit 1): it
// waits for the holder, then unlocks the slot as h|contended. From then on
// every decision on that key takes the mutex instead of the slot lock (the
// lock-free path only locks a word that is exactly the key's hash). The mark
// stays until the key is forgotten. The shard also remembers the hash of
// the key it marked last (hot), whose decisions then go to the mutex without
// reading the slot first: a read of the line the mutex's holder is writing
// would move it to the reader's core and back on every decision.
//
// Only a slot lock's holder writes the slot's word, so unlocking is a plain
// release store of the word it locked (storeRelease: one locked instruction
// per decision, the CAS, where a mutex takes two). A state is read or written
// only under its slot lock, under the shard mutex once its slot is marked,
// or while its slot is empty under the shard mutex. Every other access to a
// hash word is sync/atomic, and race-detector builds unlock with sync/atomic
// too, so the detector sees every happens-before edge.
const (
	maxLoadNum, maxLoadDen = 4, 5
	minTableLen            = 8
	// evictSample is how many occupied slots are examined for the stalest
	// state when a shard is at its cap.
	evictSample = 16
	// locked is the lock bit of a slot's hash word; contended marks a slot
	// whose decisions take the shard mutex instead.
	locked, contended = 1, 2
	flags             = locked | contended
	// wideTableBytes bounds the tables (of all shards together) whose
	// lock-free lookups use findNear: 1 MiB stays in a server core's L2
	// (2 MiB on this project's machine). At 10 000 keys (~0.35 MiB of
	// token-bucket slots) findNear took a serial decision from ~50 to ~46
	// ns; at 1 000 000 keys, where every lookup misses the cache, it made
	// them ~30 ns slower.
	wideTableBytes = 1 << 20
	// spinsBeforeYield is how many times a slot lock is retried before the
	// waiter yields the processor to (possibly) the preempted holder.
	spinsBeforeYield = 32
)

type slot[S any] struct {
	// w is the key's hash (a multiple of 4, never 0) with bit 0 set while
	// the slot is locked and bit 1 once it is contended; 0 marks an empty
	// slot. An atomic.Uint64, so that it is 8-byte aligned on 32-bit
	// platforms too.
	w atomic.Uint64
	s S // guarded by the slot lock, or by the shard mutex once contended
}

// shard is one mutex's worth of keys.
type shard[S any, R rule[S]] struct {
	// Read by every lock-free decision and written only by resize and when
	// a key turns hot, so on a cache line of their own (the mutex's line is
	// written on every decision taken under it):
	//
	// The table: its first slot and length, published by resize under mu
	// between two increments of ver (odd meanwhile), so a lock-free reader
	// that sees the same even ver before and after reading both has a
	// consistent pair (see view); under mu, see table.
	ver  atomic.Uint64
	base atomic.Pointer[slot[S]]
	size atomic.Int64
	// hot is the hash of the key this shard last marked contended: its
	// decisions take mu without first reading the key's slot, whose line
	// the mutex's holder is writing.
	hot atomic.Uint64
	// nearMax is the longest table whose lookups use findNear: the tables
	// of all shards together fit in wideTableBytes. Set before the shard
	// is shared.
	nearMax int
	_       [24]byte

	mu sync.Mutex
	// The fields below are guarded by mu.
	n   int // occupied slots
	cap int // most keys this shard may hold
	// Counters, read by Stats.
	capHits, evictions, forgotten uint64
	// atCap counts inserts that found the shard full; a full sweep runs at
	// most once per cap/8 of them (nextSweep), so it stays O(1) amortized.
	atCap, nextSweep uint64
	_                [64]byte // 192 bytes: neighbouring shards stay off these cache lines
}

// keyHash maps a key's 64-bit hash to a stored key hash:
// its low two bits clear (they are the slot's flags) and not 0 (the empty
// slot).
func keyHash(h uint64) uint64 {
	if h &^= flags; h == 0 {
		h = 4
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

// find returns the index of the slot of slots holding h and its hash word
// (h with the slot's flags), or of the empty slot where h would go and 0.
// slots must not be empty (newKeyedTable sizes every shard's table). It
// needs no lock; what it returns is current only while no structural change
// runs.
func find[S any](slots []slot[S], h uint64) (int, uint64) {
	n := len(slots)
	i := home(h, n)
	for {
		switch w := slots[i].w.Load(); w &^ flags {
		case h:
			return i, w
		case 0:
			return i, 0
		}
		if i++; i == n {
			i = 0
		}
	}
}

// findNear is find for a decision's lock-free lookup in a table small
// enough to stay in cache: it compares slots i to i+3 (i being h's home)
// without branches, and only if h is in none of them walks the probe run.
// Where a key sits in its run is a coin flip the branch predictor loses (at
// 64 % load a third of the keys are past their home slot), and each lost
// guess costs more than loading three more slots from cache; in a table
// that does not fit in cache the extra slots are often on another line, a
// second memory access, which costs more than the guess (wideTableBytes).
// Unlike find it may return h's slot past an empty one: a lookup that
// raced a backward-shift delete. That is safe because at most one unlocked
// slot holds h, with h's state (see the top of this file), and a locked
// one fails the caller's CAS.
func findNear[S any](slots []slot[S], h uint64) (int, uint64) {
	n := len(slots)
	if i := home(h, n); i+3 < n {
		s := slots[i : i+4 : i+4]
		w0, w1, w2, w3 := s[0].w.Load(), s[1].w.Load(), s[2].w.Load(), s[3].w.Load()
		j, w := -1, uint64(0) // the first of them holding h, as conditional moves
		if w3&^flags == h {
			j, w = i+3, w3
		}
		if w2&^flags == h {
			j, w = i+2, w2
		}
		if w1&^flags == h {
			j, w = i+1, w1
		}
		if w0&^flags == h {
			j, w = i, w0
		}
		if j >= 0 {
			return j, w
		}
	}
	return find(slots, h)
}

// view returns the shard's table for a lock-free lookup of h, or false if
// h is the shard's hot key or a resize was publishing the table meanwhile.
// It reads only this shard's first cache line, which decisions never write:
// a table header behind a pointer would add a dependent load ahead of the
// slot's CAS, ~8 ns per decision here.
func (sh *shard[S, R]) view(h uint64) ([]slot[S], bool) {
	if sh.hot.Load() == h {
		return nil, false
	}
	v := sh.ver.Load()
	p, n := sh.base.Load(), sh.size.Load()
	if v&1 != 0 || sh.ver.Load() != v {
		return nil, false
	}
	return unsafe.Slice(p, n), true
}

// table returns the shard's table for a structural change; it requires
// that sh.mu is held (only resize, under sh.mu, replaces it).
func (sh *shard[S, R]) table() []slot[S] {
	return unsafe.Slice(sh.base.Load(), sh.size.Load())
}

// backoff waits before retrying a slot lock: a short spin, then yielding,
// because the holder may have been preempted between lock and unlock.
func backoff(spins int) {
	if spins >= spinsBeforeYield {
		runtime.Gosched()
	}
}

// lockSlot locks sl, whatever key it holds, and returns its hash, or returns
// 0 for an empty slot (which stays empty while sh.mu is held).
func lockSlot[S any](sl *slot[S]) uint64 {
	for spins := 0; ; spins++ {
		w := sl.w.Load()
		if w == 0 {
			return 0
		}
		if w&locked == 0 && sl.w.CompareAndSwap(w, w|locked) {
			return w
		}
		backoff(spins)
	}
}

// release unlocks sl, whose word unlocked is w. Only the holder of a slot
// lock writes the slot's word, so the unlock is a plain store of w: one
// locked instruction per decision (the CAS), not two (see storeRelease).
func release[S any](sl *slot[S], w uint64) { storeRelease(&sl.w, w) }

// lock returns h's slot ready for a decision, inserting h with a fresh
// state if it is not stored; the caller decides and then calls finish with
// underMu. It finds h's slot with plain loads and CASes only that one: at
// 53–80 % load, a third to a half of the keys are not in their home slot,
// and a CAS there first fails for them at the price of a successful one
// (~8 ns here; at 1 000 000 keys, where the home slot's line is also a
// cache miss, token-bucket decisions took a median ~150 ns with that CAS
// first and ~110 without, in alternating runs). A locked or contended
// slot, a new key or a shard whose table is changing goes to acquireSlow.
func (sh *shard[S, R]) lock(r R, h uint64, now int64) (sl *slot[S], underMu bool) {
	busy := false
	if slots, ok := sh.view(h); ok {
		if len(slots) <= sh.nearMax {
			// A call of its own, so that this path keeps its values in
			// registers (around a call they were spilled to the stack,
			// and decisions at 1 000 000 keys took ~30 ns longer).
			return sh.lockNear(r, h, now, slots)
		}
		i, w := find(slots, h)
		if sl := &slots[i]; w == h && sl.w.CompareAndSwap(h, h|locked) {
			return sl, false
		}
		busy = w&flags == locked // locked and not yet marked
	}
	return sh.acquireSlow(r, h, now, busy, true)
}

// lockNear is lock's lock-free path in a table small enough for findNear.
func (sh *shard[S, R]) lockNear(r R, h uint64, now int64, slots []slot[S]) (sl *slot[S], underMu bool) {
	i, w := findNear(slots, h)
	if sl := &slots[i]; w == h && sl.w.CompareAndSwap(h, h|locked) {
		return sl, false
	}
	return sh.acquireSlow(r, h, now, w&flags == locked, true)
}

// acquireSlow returns h's slot ready for a decision, inserting h with a fresh
// state if insert is set and h is not stored (else it returns nil). If
// underMu, the decision runs under sh.mu, which the caller unlocks after it
// (see finish); otherwise the slot is locked and sh.mu is not held. busy
// says the lock-free path found the slot locked: the slot is marked
// contended. acquireSlow holds sh.mu, so no structural change runs
// meanwhile except those it makes itself.
func (sh *shard[S, R]) acquireSlow(r R, h uint64, now int64, busy, insert bool) (sl *slot[S], underMu bool) {
	sh.mu.Lock()
	slots := sh.table()
	i, w := find(slots, h)
	if w == 0 {
		if insert {
			sl = sh.insert(r, h, now)
		}
		sh.mu.Unlock()
		return sl, false
	}
	sl = &slots[i]
	// The mark is set only here, under sh.mu, so w's is current. A slot
	// still locked now is held by a lock-free decision (structural changes
	// need sh.mu): the key really is contended. The mark is published by
	// the lock's holder (lockSlot waits for the decision to finish) as the
	// unlocked word h|contended, which no lock-free CAS (from exactly h)
	// can lock again: from then on decisions on h run under sh.mu.
	if busy && w&contended == 0 && w&locked != 0 {
		lockSlot(sl)
		release(sl, h|contended)
		sh.hot.Store(h)
		w |= contended
	}
	if w&contended != 0 {
		return sl, true
	}
	lockSlot(sl) // the slot holds h: only structural changes, under sh.mu, move it
	sh.mu.Unlock()
	return sl, false
}

// finish ends a decision on h's slot sl begun by lock or acquireSlow.
func (sh *shard[S, R]) finish(sl *slot[S], h uint64, underMu bool) {
	if underMu {
		sh.mu.Unlock()
	} else {
		release(sl, h)
	}
}

// insert adds h with a fresh state and returns its slot, locked, making room
// first: at the cap by dropping the sampled state that becomes fresh
// soonest, else by growing. insert requires that sh.mu is held.
func (sh *shard[S, R]) insert(r R, h uint64, now int64) *slot[S] {
	grow := sh.n < sh.cap && (sh.n+1)*maxLoadDen > len(sh.table())*maxLoadNum
	if grow || sh.n >= sh.cap {
		sh.makeSpace(r, h, now, grow)
	}
	slots := sh.table()
	i, _ := find(slots, h)
	sl := &slots[i]
	// The slot is empty: no lookup touches its state, so it is set before
	// the hash word publishes it.
	r.init(&sl.s, now)
	sl.w.Store(h | locked)
	sh.n++
	return sl
}

// makeSpace is insert's structural part. It requires that sh.mu is held.
func (sh *shard[S, R]) makeSpace(r R, h uint64, now int64, grow bool) {
	if grow {
		// Before growing, forget the fresh keys: memory follows active
		// keys even if Sweep is never called. Grow anyway unless that freed
		// an eighth, so each full scan is paid for by growth or by the
		// inserts that refill what it freed (O(1) amortized per insert).
		if freed := sh.sweep(r, now, false); freed*8 < sh.n+freed {
			n := len(sh.table())
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
	slots := sh.table()
	n := len(slots)
	i := home(bits.RotateLeft64(h, 32), n)
	victim, best := -1, int64(0)
	for seen, probes := 0, 0; seen < evictSample && probes < n; probes++ {
		if w := lockSlot(&slots[i]); w != 0 {
			if at := r.freshAt(&slots[i].s); victim < 0 || at < best {
				victim, best = i, at
			}
			release(&slots[i], w)
			seen++
		}
		if i++; i == n {
			i = 0
		}
	}
	if victim < 0 {
		return // cap 0 cannot happen: every shard's cap is >= 1
	}
	lockSlot(&slots[victim])
	if r.isFresh(&slots[victim].s, now) {
		sh.forgotten++
	} else {
		sh.evictions++
	}
	sh.delete(slots, victim)
}

// sweep forgets every fresh key and returns how many, then, if shrink is
// set, shrinks a sparse table. sweep requires that sh.mu is held.
func (sh *shard[S, R]) sweep(r R, now int64, shrink bool) int {
	dropped := 0
	slots := sh.table()
	for i := 0; i < len(slots); {
		sl := &slots[i]
		w := lockSlot(sl)
		if w != 0 && r.isFresh(&sl.s, now) {
			sh.delete(slots, i) // may shift a later entry into i: look again
			dropped++
			continue
		}
		if w != 0 {
			release(sl, w)
		}
		i++
	}
	sh.forgotten += uint64(dropped)
	if shrink && len(slots) > minTableLen && sh.n*5 < len(slots) {
		sh.resize(max(minTableLen, sh.n*2))
	}
	return dropped
}

// delete empties slot i, which the caller has locked, shifting later entries
// of its probe run back so that lookups never meet a gap. delete requires
// that sh.mu is held.
func (sh *shard[S, R]) delete(slots []slot[S], i int) {
	n := len(slots)
	for j := i; ; {
		if j++; j == n {
			j = 0
		}
		w := lockSlot(&slots[j])
		if w == 0 {
			break
		}
		k := home(w&^flags, n)
		// The entry at j may stay if its home lies cyclically in (i, j].
		if i <= j {
			if i < k && k <= j {
				release(&slots[j], w)
				continue
			}
		} else if i < k || k <= j {
			release(&slots[j], w)
			continue
		}
		slots[i].s = slots[j].s
		slots[i].w.Store(w) // i now holds j's key, unlocked; j stays locked
		i = j
	}
	var zero S
	slots[i].s = zero
	slots[i].w.Store(0)
	sh.n--
}

// resize rehashes into a new table of n slots. It leaves every occupied slot
// of the old table locked: a lookup still holding the old table then fails
// its CAS and retries under sh.mu. resize requires that sh.mu is held.
func (sh *shard[S, R]) resize(n int) {
	ns := make([]slot[S], n)
	old := sh.table()
	for i := range old {
		sl := &old[i]
		if w := lockSlot(sl); w != 0 {
			j, _ := find(ns, w&^flags)
			ns[j].s = sl.s // ns is not yet shared
			ns[j].w.Store(w)
		}
	}
	sh.ver.Add(1)
	sh.base.Store(&ns[0])
	sh.size.Store(int64(len(ns)))
	sh.ver.Add(1)
}
