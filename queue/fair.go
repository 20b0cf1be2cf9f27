package queue

import "time"

// Fair is a queue with fairness between keys (queue.fairness: key). Each
// admission key (Job.Key; "" is one key too) gets its own FIFO inside the
// queue's bound, and Take serves them by deficit round robin: a key whose
// turn comes gains its weight (default 1) in credit and starts jobs while
// its credit covers the front job's cost, so over a round each active key
// gets starts in proportion to its weight, whatever the others queued.
// Settings.KeyCapacity bounds the cost one key may hold (Share), so one
// tenant cannot fill the whole queue either. A key's sub-queue is deleted
// as soon as it is empty, so the state is bounded by the capacity.
//
// With priority levels (Settings.Priorities) the order is: the most
// urgent level with a ready job first; within it, its ready retries, then
// deficit round robin between the level's keys; within a key, FIFO. Each
// level keeps its own round, so a key's credit in one level does not
// carry to another. Delayed jobs (Job.NotBefore) wait in one set shared
// by the levels, count against the bound and the key's share, and join
// their key's sub-queue in their level once due.
//
// Not safe for concurrent use: the owning lane's lock guards it.
type Fair struct {
	levels  []drr // by priority, most urgent first
	delayed delayedSet
	// held is key → cost queued in every level and delayed (retries not
	// included), kept only once the queue has had several levels or a
	// delayed job (nil before: level 0's sub-queues say it, and a job
	// costs no extra map update).
	held     map[string]int
	cost     int // sum of every held job's cost, retries and delayed jobs included
	capacity int
	keyCap   int
	weights  map[string]int // key → weight; absent = 1
	bytes    byteBound
}

var (
	_ Queue   = (*Fair)(nil)
	_ Memory  = (*Fair)(nil)
	_ Shares  = (*Fair)(nil)
	_ Picker  = (*Fair)(nil)
	_ Counter = (*Fair)(nil)
)

// NewFair returns an empty fair queue configured by s.
func NewFair(s Settings) *Fair {
	q := &Fair{}
	q.Configure(s)
	return q
}

// Roles is the fair queue with the roles it plays: its jobs live in
// memory, each key holds at most its share, and the drain may pass over
// a key's jobs.
func (q *Fair) Roles() Roles {
	return Roles{Queue: q, Memory: q, Shares: q, Picker: q, Counter: q}
}

// Configure applies a new bound, per-key bound, weights and number of
// levels in place; held jobs move to their level under the new count
// (Level), each key keeping its order.
func (q *Fair) Configure(s Settings) {
	q.capacity = max(s.Capacity, 0)
	q.keyCap = s.KeyCapacity
	if q.keyCap == 0 {
		q.keyCap = q.capacity
	}
	q.weights = s.Weights
	q.bytes.max = max(s.MaxBytes, 0)
	if n := s.levelCount(); n != len(q.levels) {
		if n > 1 {
			q.track()
		}
		q.relevel(n)
	}
	for i := range q.levels {
		for _, k := range q.levels[i].ring {
			k.weight = q.weightOf(k.key)
		}
	}
}

// relevel rebuilds the levels as n, moving every held job to its new one.
func (q *Fair) relevel(n int) {
	old := q.levels
	q.levels = make([]drr, n)
	for i := range q.levels {
		q.levels[i] = newDRR()
	}
	for i := range old {
		for _, e := range old[i].retries {
			lv := &q.levels[Level(e.job, n)]
			lv.retries.add(e.job, e.at)
			lv.cost += JobCost(e.job)
		}
		for _, k := range old[i].ring {
			for _, e := range k.jobs {
				q.levels[Level(e.job, n)].push(e, q.weightOf)
			}
		}
	}
}

// weightOf is key's weight: Settings.Weights', at least 1 (a weight below
// 1 would never earn a turn).
func (q *Fair) weightOf(key string) int {
	if w, ok := q.weights[key]; ok {
		return max(w, 1)
	}
	return 1
}

func (q *Fair) Fits(need int) bool   { return q.cost+need <= q.capacity }
func (q *Fair) FitsBytes(n int) bool { return q.bytes.fits(n) }
func (q *Fair) Bytes() int64         { return q.bytes.held }
func (q *Fair) Cost() int            { return q.cost }

// Keys is the number of keys with jobs queued or delayed.
func (q *Fair) Keys() int {
	if q.held == nil {
		return len(q.levels[0].ring)
	}
	return len(q.held)
}

// keyCost is the cost key holds queued and delayed (retries not included).
func (q *Fair) keyCost(key string) int {
	if q.held == nil {
		return q.levels[0].keyCost(key)
	}
	return q.held[key]
}

// track starts keeping held, from the jobs queued now: called before the
// queue first has several levels or a delayed job.
func (q *Fair) track() {
	if q.held != nil {
		return
	}
	q.held = map[string]int{}
	for i := range q.levels {
		for _, k := range q.levels[i].ring {
			q.held[k.key] += k.cost
		}
	}
	for _, e := range q.delayed.heap {
		q.held[e.job.Key] += JobCost(e.job)
	}
}
func (q *Fair) Cap() int { return q.capacity }

// Counts does not change the queue: a delayed job due by now that has
// not joined its level yet is counted there.
func (q *Fair) Counts(now time.Time, levels []int) int {
	n := min(len(levels), len(q.levels))
	for i := range n {
		levels[i] = q.levels[i].len()
	}
	due := q.delayed.countDue(0, now, levels[:n], len(q.levels))
	return q.delayed.len() - due
}

func (q *Fair) Levels() int { return len(q.levels) }

func (q *Fair) Len() int {
	n := q.delayed.len()
	for i := range q.levels {
		n += q.levels[i].len()
	}
	return n
}

// hold counts c more (or, negative, less) of key's queued cost.
func (q *Fair) hold(key string, c int) {
	if q.held == nil {
		return
	}
	if n := q.held[key] + c; n > 0 {
		q.held[key] = n
	} else {
		delete(q.held, key)
	}
}

// Offer appends job to its key's sub-queue in its level (a delayed job:
// to the delayed set), or refuses it with ErrFull when its cost does not
// fit the whole queue's bound, or ErrMaxBytes when its payload does not
// fit the byte bound (the key's share is Share's, checked by the caller).
func (q *Fair) Offer(job *Job, at time.Time) Stored {
	c := JobCost(job)
	if err := refuse(q.Fits(c), &q.bytes, job); err != nil {
		return placed(Placed{}, err)
	}
	ready := readyAt(job, at)
	if q.delayed.len() > 0 {
		q.promote(at) // jobs due by now go first: FIFO order is ready order
	}
	n, ahead := q.levels[0].len(), 0
	if q.held == nil && !ready.After(at) { // one level, nothing delayed: one round's work
		own := q.levels[0].keyCost(job.Key)
		ahead = q.levels[0].aheadAt(job.Key, q.weightOf(job.Key), own, own+c)
	} else {
		n, ahead = q.aheadOf(job, ready)
	}
	if ready.After(at) {
		q.track()
		q.delayed.push(job, ready)
	} else {
		q.levels[Level(job, len(q.levels))].push(entry{job, at}, q.weightOf)
	}
	q.hold(job.Key, c)
	q.cost += c
	q.bytes.add(job)
	return placed(Placed{Position: n + 1, Ahead: ahead}, nil)
}

// promote moves the delayed jobs due by now to their keys' sub-queues in
// their levels, in the order of their instants.
func (q *Fair) promote(now time.Time) {
	for e, ok := q.delayed.popDue(now); ok; e, ok = q.delayed.popDue(now) {
		q.levels[Level(e.job, len(q.levels))].push(e, q.weightOf)
	}
}

func (q *Fair) NextReady() (time.Time, bool) { return q.NextReadyIf(nil) }

// NextReadyIf is NextReady over the keys that may start (Picker).
func (q *Fair) NextReadyIf(may func(key string) bool) (time.Time, bool) {
	t, ok := q.delayed.next()
	for i := range q.levels {
		if at, lok := q.levels[i].nextReadyIf(may); lok && (!ok || at.Before(t)) {
			t, ok = at, true
		}
	}
	return t, ok
}

func (q *Fair) Take(now time.Time) (*Job, time.Time, bool) { return q.TakeIf(now, nil) }

// TakeIf is Take of the first job, in Take's order, whose key may start
// (Picker): a level whose ready jobs are all of keys that may not is
// passed over for the next.
func (q *Fair) TakeIf(now time.Time, may func(key string) bool) (*Job, time.Time, bool) {
	if q.delayed.len() > 0 {
		q.promote(now)
	}
	for i := range q.levels {
		e, retry, ok := q.levels[i].takeIf(now, may)
		if !ok {
			continue
		}
		if !retry { // a fresh job: its key holds less
			q.hold(e.job.Key, -JobCost(e.job))
		}
		q.cost -= JobCost(e.job)
		q.bytes.sub(e.job)
		return e.job, e.at, true
	}
	return nil, time.Time{}, false
}

func (q *Fair) RetryLater(job *Job, at time.Time, _ bool) {
	c := JobCost(job)
	lv := &q.levels[Level(job, len(q.levels))]
	lv.retries.add(job, at)
	lv.cost += c
	q.cost += c
	q.bytes.add(job)
}

// DropFront drops, from the front of every key's sub-queue in every
// level, jobs while drop returns true (deadlines follow queue order within
// a key).
func (q *Fair) DropFront(drop func(*Job) bool) []*Job {
	var out []*Job
	for i := range q.levels {
		out = q.levels[i].dropFront(drop, out)
	}
	for _, j := range out {
		c := JobCost(j)
		q.hold(j.Key, -c)
		q.cost -= c
		q.bytes.sub(j)
	}
	return out
}

func (q *Fair) Release() []*Job {
	out := make([]*Job, 0, q.Len())
	for i := range q.levels {
		out = q.levels[i].jobs(out)
	}
	out = q.delayed.drain(out)
	n, tracked := len(q.levels), q.held != nil
	*q = Fair{capacity: q.capacity, keyCap: q.keyCap, weights: q.weights,
		bytes: byteBound{max: q.bytes.max}}
	q.relevel(n)
	if tracked {
		q.track()
	}
	return out
}

// Ahead estimates the cost that starts before job if it were offered at
// at (Intake.Ahead): the more urgent levels', then, in job's level, the
// key's own queued cost and what the other keys start meanwhile.
func (q *Fair) Ahead(job *Job, at time.Time) int {
	_, cost := q.aheadOf(job, readyAt(job, at))
	return cost
}

// aheadOf is the count of the held jobs that start before job, ready at
// ready, and an estimate of their cost: every job of the more urgent
// levels and of job's own (the count does not estimate the round), the
// cost by aheadAt in job's level, and the delayed jobs of those levels
// due by ready.
func (q *Fair) aheadOf(job *Job, ready time.Time) (n, cost int) {
	p := Level(job, len(q.levels))
	for i := range q.levels[:p] {
		n += q.levels[i].len()
		cost += q.levels[i].cost
	}
	lv := &q.levels[p]
	own := lv.keyCost(job.Key)
	n += lv.len()
	cost += lv.aheadAt(job.Key, q.weightOf(job.Key), own, own+JobCost(job))
	dn, dc := q.delayed.aheadBy(ready, p, len(q.levels))
	return n + dn, cost + dc
}

// Share is job's key's share: what it holds (queued in every level and
// delayed), KeyCapacity, and — when job does not fit — an estimate of the
// cost that starts before enough of the key's own jobs have started to
// make room for it: the more urgent levels', and in job's level the other
// keys served in turn.
func (q *Fair) Share(job *Job) Share {
	s := Share{Held: q.keyCost(job.Key), Limit: q.keyCap}
	if c := JobCost(job); s.Over(c) {
		need := s.Held + c - q.keyCap // units of the key's cost that must start first
		p := Level(job, len(q.levels))
		for i := range q.levels[:p] {
			s.Ahead += q.levels[i].cost
		}
		s.Ahead += q.levels[p].aheadAt(job.Key, q.weightOf(job.Key), need-1, need)
	}
	return s
}
