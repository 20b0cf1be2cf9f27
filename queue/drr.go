package queue

import "time"

// drr is one priority level of a Fair queue: a sub-queue per key, served
// by deficit round robin, and the level's retries, which go ahead of every
// key. A key's sub-queue is deleted as soon as it is empty.
type drr struct {
	keys    map[string]*keyQueue
	ring    []*keyQueue // keys with queued jobs, in round-robin order
	cur     int         // index in ring of the key being served
	retries retryList
	fresh   int // jobs in the keys' sub-queues
	cost    int // sum of the level's costs, retries included
}

// keyQueue is one key's sub-queue in one level.
type keyQueue struct {
	key     string
	jobs    []entry
	cost    int // sum of the queued jobs' costs
	deficit int // DRR credit, in cost units
	weight  int
}

func newDRR() drr { return drr{keys: map[string]*keyQueue{}} }

// len is the number of jobs in the level, retries included.
func (d *drr) len() int { return d.fresh + len(d.retries) }

// push appends e to its key's sub-queue; weight gives a new key's weight.
func (d *drr) push(e entry, weight func(string) int) {
	k := d.keys[e.job.Key]
	if k == nil {
		k = &keyQueue{key: e.job.Key, weight: weight(e.job.Key)}
		d.keys[e.job.Key] = k
		if len(d.ring) == 0 {
			d.cur, k.deficit = 0, k.weight
		}
		d.ring = append(d.ring, k)
	}
	c := JobCost(e.job)
	k.jobs = append(k.jobs, e)
	k.cost += c
	d.fresh++
	d.cost += c
}

// nextReadyIf is when the level's next job whose key may start (Picker;
// nil: any) is ready: the front job of the first such key from the one
// being served (fresh jobs are ready from their enqueue time) or the
// earliest such retry, whichever is sooner.
func (d *drr) nextReadyIf(may func(string) bool) (time.Time, bool) {
	var front entry
	ok := false
	for i := range d.ring {
		if k := d.ring[(d.cur+i)%len(d.ring)]; allows(may, k.key) {
			front, ok = k.jobs[0], true
			break
		}
	}
	if r, rok := d.retries.firstIf(may); rok && (!ok || r.at.Before(front.at)) {
		return r.at, true
	}
	return front.at, ok
}

// takeIf removes the level's job to start at now among the keys that may
// start (Picker; nil: any): a ready retry (retry true), else the front job
// of the key whose turn it is. A key that may not is passed over: it loses the rest of its turn and earns no credit
// while it waits, so it cannot make up for the wait once it may again.
func (d *drr) takeIf(now time.Time, may func(string) bool) (e entry, retry, ok bool) {
	if e, ok := d.retries.popReadyIf(now, may); ok {
		d.cost -= JobCost(e.job)
		return e, true, true
	}
	if !d.anyAllowed(may) {
		return entry{}, false, false
	}
	k := d.ring[d.cur]
	for !allows(may, k.key) || k.deficit < JobCost(k.jobs[0].job) { // DRR: the next key's turn
		if !allows(may, k.key) {
			k.deficit = 0
		}
		d.cur = (d.cur + 1) % len(d.ring)
		k = d.ring[d.cur]
		if allows(may, k.key) {
			k.deficit += k.weight
		}
	}
	e = d.popFront(d.cur)
	k.deficit -= JobCost(e.job)
	return e, false, true
}

// anyAllowed reports whether a key with queued jobs may start.
func (d *drr) anyAllowed(may func(string) bool) bool {
	if may == nil {
		return len(d.ring) > 0
	}
	for _, k := range d.ring {
		if may(k.key) {
			return true
		}
	}
	return false
}

// allows reports whether may lets a job of key start (nil: every key).
func allows(may func(string) bool, key string) bool { return may == nil || may(key) }

// popFront removes the front job of the key at ring index i, and the key
// when that empties it.
func (d *drr) popFront(i int) entry {
	k := d.ring[i]
	e := k.jobs[0]
	k.jobs[0] = entry{} // let the job be collected
	k.jobs = k.jobs[1:]
	c := JobCost(e.job)
	k.cost -= c
	d.fresh--
	d.cost -= c
	if len(k.jobs) == 0 {
		d.removeAt(i)
	}
	return e
}

// removeAt deletes the (empty) key at ring index i. When it was the key
// being served, the next key's turn begins.
func (d *drr) removeAt(i int) {
	delete(d.keys, d.ring[i].key)
	last := len(d.ring) - 1
	copy(d.ring[i:], d.ring[i+1:])
	d.ring[last] = nil
	d.ring = d.ring[:last]
	switch {
	case len(d.ring) == 0:
		d.ring, d.cur = nil, 0
	case i < d.cur:
		d.cur--
	case i == d.cur:
		d.cur %= len(d.ring)
		d.ring[d.cur].deficit += d.ring[d.cur].weight
	}
}

// dropFront drops, from the front of every key's sub-queue, jobs while
// drop returns true, appending them to out.
func (d *drr) dropFront(drop func(*Job) bool, out []*Job) []*Job {
	for i := 0; i < len(d.ring); {
		k, n := d.ring[i], len(d.ring)
		for len(d.ring) == n && drop(k.jobs[0].job) { // popFront removes an emptied key
			out = append(out, d.popFront(i).job)
		}
		if len(d.ring) == n {
			i++
		}
	}
	return out
}

// jobs appends every job of the level to out, retries first.
func (d *drr) jobs(out []*Job) []*Job {
	out = d.retries.jobs(out)
	for _, k := range d.ring {
		for _, e := range k.jobs {
			out = append(out, e.job)
		}
	}
	return out
}

// keyCost is the cost key holds in the level's sub-queues.
func (d *drr) keyCost(key string) int {
	if k := d.keys[key]; k != nil {
		return k.cost
	}
	return 0
}

// aheadAt estimates the cost of the level that starts before the upto-th
// unit of cost queued for key starts, when before units of the key's own
// go first: the retries, those, and what every other key starts in the
// rounds the key needs (w, its weight, of cost per round). O(active keys).
func (d *drr) aheadAt(key string, w, before, upto int) int {
	rounds := (upto + w - 1) / w
	n := before + d.retries.cost()
	for _, k := range d.ring {
		if k.key != key {
			n += min(k.cost, rounds*k.weight)
		}
	}
	return n
}
