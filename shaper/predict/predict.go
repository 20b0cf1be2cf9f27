// Package predict is the arithmetic of a leaky bucket's answers to a
// submission it refuses: how long until a start frees a slot, until the
// level has dropped by a number of slots, until a key's share frees, and
// by how much a predicted start misses a job's max wait. The functions
// are pure: the lane gathers the values under its lock (its schedule's
// interval, what the last start still holds, its next free start) and
// passes them in; time is an argument.
package predict

import "time"

// SlotFreesIn is the time from now until the next start frees a slot,
// when that start is at nextFree (no earlier than the lane's policies
// allow, nor before its first ready job). When it is already due the
// slot goes to whoever comes first, so the answer is one interval.
func SlotFreesIn(now, nextFree time.Time, interval time.Duration) time.Duration {
	if d := nextFree.Sub(now); d > 0 {
		return d
	}
	return interval
}

// LevelFreesIn is the time from now until the bucket's level has dropped
// by need slots (at least one). The last start still holds held slots,
// freeing the first after first and one per interval after it; past those,
// the level drops again only from the next start, at nextFree() (asked
// only then), one slot per interval.
func LevelFreesIn(now time.Time, need, held int, first, interval time.Duration, nextFree func() time.Time) time.Duration {
	need = max(need, 1)
	if need <= held {
		return first + time.Duration(need-1)*interval
	}
	next := later(nextFree(), now)
	if held > 0 {
		next = later(next, now.Add(first+time.Duration(held-1)*interval))
	}
	return next.Sub(now) + time.Duration(need-held)*interval
}

// StartFreesIn is the time until the need-th start from now, when the
// next one frees a slot after slot (SlotFreesIn) and each further start
// comes one interval later (a fair-queuing key's share frees when its own
// jobs start). An unknown slot (0: nothing is scheduled) stays unknown.
func StartFreesIn(slot time.Duration, need int, interval time.Duration) time.Duration {
	if slot == 0 {
		return 0
	}
	return slot + time.Duration(max(need, 1)-1)*interval
}

// Late is by how much a job ready at ready, with max wait wait, misses it
// when predicted to start at start (no earlier than ready), with margin
// for a late scheduler; zero or less when it does not.
func Late(start, ready time.Time, wait, margin time.Duration) time.Duration {
	return later(start, ready).Add(margin).Sub(ready.Add(wait))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
