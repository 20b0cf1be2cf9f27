package queue

import "time"

// delayedSet holds the delayed jobs (offered with a ready instant after
// their Enqueued): a binary min-heap by instant, ties in arrival order, so
// the next one due is at the root. A delayed job counts against the bound
// (its owner's cost includes it) but is never ready before its instant, so
// it holds up no ready job; once due, its owner moves it to the back of its
// level's FIFO (promote). The zero value is empty. Hand-written rather than
// container/heap, whose Push boxes every entry in an interface.
type delayedSet struct {
	heap []delayedEntry
	seq  uint64 // arrival counter: the tie-break of equal instants
}

// delayedEntry is a delayed job, its instant, and its place in arrival
// order.
type delayedEntry struct {
	entry
	seq uint64
}

func (d *delayedSet) len() int { return len(d.heap) }

// less orders by instant, then arrival.
func (d *delayedSet) less(i, j int) bool {
	a, b := d.heap[i], d.heap[j]
	if !a.at.Equal(b.at) {
		return a.at.Before(b.at)
	}
	return a.seq < b.seq
}

// push adds job, due at at.
func (d *delayedSet) push(job *Job, at time.Time) {
	d.seq++
	d.heap = append(d.heap, delayedEntry{entry{job, at}, d.seq})
	for i := len(d.heap) - 1; i > 0; {
		p := (i - 1) / 2
		if !d.less(i, p) {
			break
		}
		d.heap[i], d.heap[p] = d.heap[p], d.heap[i]
		i = p
	}
}

// next returns the instant of the job due first; ok is false when empty.
func (d *delayedSet) next() (time.Time, bool) {
	if len(d.heap) == 0 {
		return time.Time{}, false
	}
	return d.heap[0].at, true
}

// popDue removes and returns the job due first if its instant is at or
// before now.
func (d *delayedSet) popDue(now time.Time) (entry, bool) {
	if len(d.heap) == 0 || d.heap[0].at.After(now) {
		return entry{}, false
	}
	e := d.heap[0].entry
	last := len(d.heap) - 1
	d.heap[0] = d.heap[last]
	d.heap[last] = delayedEntry{} // let the job be collected
	d.heap = d.heap[:last]
	d.down(0)
	return e, true
}

// down restores the heap below i.
func (d *delayedSet) down(i int) {
	n := len(d.heap)
	for {
		m, l, r := i, 2*i+1, 2*i+2
		if l < n && d.less(l, m) {
			m = l
		}
		if r < n && d.less(r, m) {
			m = r
		}
		if m == i {
			return
		}
		d.heap[i], d.heap[m] = d.heap[m], d.heap[i]
		i = m
	}
}

// aheadBy counts the jobs whose instant is at or before t and whose level
// (of levels) is at most p, and their cost: the delayed jobs that will
// stand before a job of level p ready at t. It visits only the jobs due by
// t and their children (a heap's children are never due earlier than
// their parent), so asking about an instant before every delayed job
// costs O(1).
func (d *delayedSet) aheadBy(t time.Time, p, levels int) (n, cost int) {
	return d.walk(0, t, p, levels)
}

func (d *delayedSet) walk(i int, t time.Time, p, levels int) (n, cost int) {
	if i >= len(d.heap) || d.heap[i].at.After(t) {
		return 0, 0
	}
	if j := d.heap[i].job; Level(j, levels) <= p {
		n, cost = 1, JobCost(j)
	}
	ln, lc := d.walk(2*i+1, t, p, levels)
	rn, rc := d.walk(2*i+2, t, p, levels)
	return n + ln + rn, cost + lc + rc
}

// countDue adds each job due by t to its level's entry of levels (a
// level of k; one past levels is not counted there) and returns how many
// jobs are due; like aheadBy it visits only the due jobs and their
// children.
func (d *delayedSet) countDue(i int, t time.Time, levels []int, k int) int {
	if i >= len(d.heap) || d.heap[i].at.After(t) {
		return 0
	}
	if p := Level(d.heap[i].job, k); p < len(levels) {
		levels[p]++
	}
	return 1 + d.countDue(2*i+1, t, levels, k) + d.countDue(2*i+2, t, levels, k)
}

// jobs appends the delayed jobs to out and empties the set.
func (d *delayedSet) drain(out []*Job) []*Job {
	for _, e := range d.heap {
		out = append(out, e.job)
	}
	d.heap = nil
	return out
}
