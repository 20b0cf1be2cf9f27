package queue

import "time"

// Bucket is the leaky bucket's queue: a FIFO per priority level
// (Settings.Priorities; one by default) bounded together by the cost they
// hold, each with a list of retries waiting out their backoff that go
// ahead of the level's fresh jobs once ready, and a set of delayed jobs
// (Job.NotBefore) that count against the bound but join their level's
// FIFO only once due. Take serves the most urgent level with a ready job.
// Offer refuses with ErrFull at capacity instead of blocking. The zero
// value is an empty bucket of capacity 0 (every Offer fails); use
// NewBucket. Not safe for concurrent use: the owning lane's lock guards
// it. No method blocks, and Offer/Take do not allocate once the rings
// have grown to the steady-state depth; with one level and no delayed job
// they do the work of a single FIFO.
type Bucket struct {
	levels   []level // by priority, most urgent first; at least one once configured
	delayed  delayedSet
	cost     int // sum of the held jobs' costs, retries and delayed jobs included
	capacity int
	bytes    byteBound
}

// level is one priority level of a Bucket.
type level struct {
	fifo    ring[entry]
	retries retryList
	cost    int // sum of the costs in fifo and retries
}

var (
	_ Queue   = (*Bucket)(nil)
	_ Memory  = (*Bucket)(nil)
	_ Counter = (*Bucket)(nil)
)

// NewBucket returns an empty bucket bounded by s.Capacity, with
// s.Priorities levels.
func NewBucket(s Settings) *Bucket {
	b := &Bucket{}
	b.Configure(s)
	return b
}

// Roles is the bucket with the roles it plays: its jobs live in memory,
// and the drain may pass over a key's jobs.
func (b *Bucket) Roles() Roles { return Roles{Queue: b, Memory: b, Picker: b, Counter: b} }

// Offer appends job at the back of its level (a delayed job: to the
// delayed set), or refuses it, changing nothing, with ErrFull when its
// cost does not fit or ErrMaxBytes when its payload does not.
func (b *Bucket) Offer(job *Job, at time.Time) Stored {
	c := JobCost(job)
	if err := refuse(b.Fits(c), &b.bytes, job); err != nil {
		return placed(Placed{}, err)
	}
	if len(b.levels) > 1 || b.delayed.len() > 0 || job.NotBefore.After(at) {
		return b.offerLevels(job, at, c)
	}
	lv := &b.levels[0] // one level, nothing delayed: the single FIFO's work
	n, ahead := lv.fifo.len()+len(lv.retries), lv.cost
	lv.fifo.pushBack(entry{job, at})
	lv.cost += c
	b.cost += c
	b.bytes.add(job)
	return placed(Placed{Position: n + 1, Ahead: ahead}, nil)
}

// offerLevels is Offer for a job of cost c, which fits, with priority
// levels or delayed jobs.
func (b *Bucket) offerLevels(job *Job, at time.Time, c int) Stored {
	ready := readyAt(job, at)
	b.promote(at) // jobs due by now go first: FIFO order is ready order
	n, ahead := b.aheadOf(job, ready)
	if ready.After(at) {
		b.delayed.push(job, ready)
	} else {
		lv := &b.levels[Level(job, len(b.levels))]
		lv.fifo.pushBack(entry{job, at})
		lv.cost += c
	}
	b.cost += c
	b.bytes.add(job)
	return placed(Placed{Position: n + 1, Ahead: ahead}, nil)
}

// aheadOf is the count and cost of the held jobs that start before job,
// ready at ready (Intake.Ahead).
func (b *Bucket) aheadOf(job *Job, ready time.Time) (n, cost int) {
	p := Level(job, len(b.levels))
	for i := range b.levels[:p+1] {
		lv := &b.levels[i]
		n += lv.fifo.len() + len(lv.retries)
		cost += lv.cost
	}
	dn, dc := b.delayed.aheadBy(ready, p, len(b.levels))
	return n + dn, cost + dc
}

// promote moves the delayed jobs due by now to the back of their levels'
// FIFOs, in the order of their instants.
func (b *Bucket) promote(now time.Time) {
	for e, ok := b.delayed.popDue(now); ok; e, ok = b.delayed.popDue(now) {
		lv := &b.levels[Level(e.job, len(b.levels))]
		lv.fifo.pushBack(e)
		lv.cost += JobCost(e.job)
	}
}

func (b *Bucket) Fits(need int) bool   { return b.cost+need <= b.capacity }
func (b *Bucket) Cost() int            { return b.cost }
func (b *Bucket) Cap() int             { return b.capacity }
func (b *Bucket) FitsBytes(n int) bool { return b.bytes.fits(n) }
func (b *Bucket) Bytes() int64         { return b.bytes.held }
func (b *Bucket) Ahead(job *Job, at time.Time) int {
	_, cost := b.aheadOf(job, readyAt(job, at))
	return cost
}

// Counts does not change the queue: a delayed job due by now that has
// not joined its level yet is counted there.
func (b *Bucket) Counts(now time.Time, levels []int) int {
	n := min(len(levels), len(b.levels))
	for i := range n {
		levels[i] = b.levels[i].fifo.len() + len(b.levels[i].retries)
	}
	due := b.delayed.countDue(0, now, levels[:n], len(b.levels))
	return b.delayed.len() - due
}

func (b *Bucket) Levels() int { return len(b.levels) }

func (b *Bucket) Len() int {
	n := b.delayed.len()
	for i := range b.levels {
		n += b.levels[i].fifo.len() + len(b.levels[i].retries)
	}
	return n
}

// Configure applies a new bound, byte bound and number of levels in
// place; held jobs move to their level under the new count (Level), each
// level keeping its order.
func (b *Bucket) Configure(s Settings) {
	b.capacity, b.bytes.max = max(s.Capacity, 0), max(s.MaxBytes, 0)
	if n := s.levelCount(); n != len(b.levels) {
		b.relevel(n)
	}
}

// relevel rebuilds the levels as n, moving every held job to its new one.
func (b *Bucket) relevel(n int) {
	old := b.levels
	b.levels = make([]level, n)
	for i := range old {
		for e, ok := old[i].fifo.poll(); ok; e, ok = old[i].fifo.poll() {
			lv := &b.levels[Level(e.job, n)]
			lv.fifo.pushBack(e)
			lv.cost += JobCost(e.job)
		}
		for _, e := range old[i].retries {
			lv := &b.levels[Level(e.job, n)]
			lv.retries.add(e.job, e.at)
			lv.cost += JobCost(e.job)
		}
	}
}

func (b *Bucket) NextReady() (time.Time, bool) {
	t, ok := b.delayed.next()
	for i := range b.levels {
		lv := &b.levels[i]
		front, fok := lv.fifo.peek()
		if at, lok := lv.retries.before(front.at, fok); lok && (!ok || at.Before(t)) {
			t, ok = at, true
		}
	}
	return t, ok
}

func (b *Bucket) Take(now time.Time) (*Job, time.Time, bool) {
	if b.delayed.len() > 0 {
		b.promote(now)
	}
	for i := range b.levels {
		lv := &b.levels[i]
		e, ok := lv.retries.popReady(now)
		if !ok {
			e, ok = lv.fifo.poll()
		}
		if ok {
			return b.took(lv, e)
		}
	}
	return nil, time.Time{}, false
}

// took books e's leaving level lv (its cost and bytes) and returns it as
// Take does.
func (b *Bucket) took(lv *level, e entry) (*Job, time.Time, bool) {
	c := JobCost(e.job)
	lv.cost -= c
	b.cost -= c
	b.bytes.sub(e.job)
	return e.job, e.at, true
}

func (b *Bucket) RetryLater(job *Job, at time.Time, _ bool) {
	if len(b.levels) == 0 { // the zero Bucket
		b.levels = make([]level, 1)
	}
	c := JobCost(job)
	lv := &b.levels[Level(job, len(b.levels))]
	lv.retries.add(job, at)
	lv.cost += c
	b.cost += c
	b.bytes.add(job)
}

func (b *Bucket) DropFront(drop func(*Job) bool) []*Job {
	var out []*Job
	for i := range b.levels {
		lv := &b.levels[i]
		for {
			e, ok := lv.fifo.peek()
			if !ok || !drop(e.job) {
				break
			}
			lv.fifo.poll()
			c := JobCost(e.job)
			lv.cost -= c
			b.cost -= c
			b.bytes.sub(e.job)
			out = append(out, e.job)
		}
	}
	return out
}

func (b *Bucket) Release() []*Job {
	out := make([]*Job, 0, b.Len())
	for i := range b.levels {
		lv := &b.levels[i]
		out = lv.retries.jobs(out)
		for e, ok := lv.fifo.poll(); ok; e, ok = lv.fifo.poll() {
			out = append(out, e.job)
		}
		lv.retries, lv.cost = nil, 0
	}
	out = b.delayed.drain(out)
	b.cost, b.bytes.held = 0, 0
	return out
}
