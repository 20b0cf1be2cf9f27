package queue

// This file holds Memory.Withdraw: taking back, last first, the jobs an
// all-or-nothing offer placed when a later one of them did not fit.

// Withdraw takes back job, placed by Offer and not taken since, as if it
// had never been offered, and reports whether it was held. Delayed jobs
// that became due meanwhile stay promoted (they were due anyway).
func (b *Bucket) Withdraw(job *Job) bool {
	c := JobCost(job)
	if !b.delayed.remove(job) {
		lv := &b.levels[Level(job, len(b.levels))]
		i := lv.fifo.lastIndex(func(e entry) bool { return e.job == job })
		if i < 0 {
			return false
		}
		lv.fifo.removeNearBack(i)
		lv.cost -= c
	}
	b.cost -= c
	b.bytes.sub(job)
	return true
}

// Withdraw takes back job, placed by Offer and not taken since, as if it
// had never been offered, and reports whether it was held. A key whose
// sub-queue it empties leaves the round robin.
func (q *Fair) Withdraw(job *Job) bool {
	c := JobCost(job)
	if !q.delayed.remove(job) && !q.levels[Level(job, len(q.levels))].withdraw(job) {
		return false
	}
	q.hold(job.Key, -c)
	q.cost -= c
	q.bytes.sub(job)
	return true
}

// withdraw removes job from its key's sub-queue (searched from the back,
// where a job just offered is), and the key when that empties it.
func (d *drr) withdraw(job *Job) bool {
	k := d.keys[job.Key]
	if k == nil {
		return false
	}
	for i := len(k.jobs) - 1; i >= 0; i-- {
		if k.jobs[i].job != job {
			continue
		}
		copy(k.jobs[i:], k.jobs[i+1:])
		k.jobs[len(k.jobs)-1] = entry{} // let the job be collected
		k.jobs = k.jobs[:len(k.jobs)-1]
		c := JobCost(job)
		k.cost -= c
		d.fresh--
		d.cost -= c
		if len(k.jobs) == 0 {
			for r := range d.ring {
				if d.ring[r] == k {
					d.removeAt(r)
					break
				}
			}
		}
		return true
	}
	return false
}

// remove takes job out of the set, reporting whether it was there.
func (d *delayedSet) remove(job *Job) bool {
	for i := range d.heap {
		if d.heap[i].job != job {
			continue
		}
		last := len(d.heap) - 1
		d.heap[i] = d.heap[last]
		d.heap[last] = delayedEntry{} // let the job be collected
		d.heap = d.heap[:last]
		if i < last {
			d.down(i)
			d.up(i)
		}
		return true
	}
	return false
}

// up restores the heap above i.
func (d *delayedSet) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !d.less(i, p) {
			return
		}
		d.heap[i], d.heap[p] = d.heap[p], d.heap[i]
		i = p
	}
}

// lastIndex is the index from the front of the last item match accepts,
// or -1.
func (r *ring[T]) lastIndex(match func(T) bool) int {
	for i := r.n - 1; i >= 0; i-- {
		if match(r.at(i)) {
			return i
		}
	}
	return -1
}

// removeNearBack removes the i-th item from the front, moving the items
// after it one place forward: the others keep their order, and an item
// near the back costs little.
func (r *ring[T]) removeNearBack(i int) {
	mask := len(r.buf) - 1
	for j := i; j < r.n-1; j++ {
		r.buf[(r.head+j)&mask] = r.buf[(r.head+j+1)&mask]
	}
	var zero T
	r.buf[(r.head+r.n-1)&mask] = zero // release the reference for the GC
	r.n--
}
