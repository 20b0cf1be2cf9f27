package queue

import "time"

// Fair is a queue with fairness between keys (queue.fairness: key). Each
// admission key (Job.Key; "" is one key too) gets its own FIFO inside the
// queue's bound, and Take serves them by deficit round robin: a key whose
// turn comes gains its weight (default 1) in credit and starts jobs while
// its credit covers the front job's cost, so over a round each active key
// gets starts in proportion to its weight, whatever the others queued.
// Settings.KeyCapacity bounds the cost one key may hold (Share), so one
// tenant cannot fill the whole queue either. Retries go ahead of every key,
// as in a Bucket. A key's sub-queue is deleted as soon as it is empty, so
// the state is bounded by the capacity.
//
// Not safe for concurrent use: the owning lane's lock guards it.
type Fair struct {
	keys     map[string]*keyQueue
	ring     []*keyQueue // keys with queued jobs, in round-robin order
	cur      int         // index in ring of the key being served
	retries  retryList
	fresh    int // jobs in the keys' sub-queues
	cost     int // sum of every held job's cost, retries included
	capacity int
	keyCap   int
	weights  map[string]int // key → weight; absent = 1
	bytes    byteBound
}

var (
	_ Queue  = (*Fair)(nil)
	_ Memory = (*Fair)(nil)
	_ Shares = (*Fair)(nil)
)

// keyQueue is one key's sub-queue.
type keyQueue struct {
	key     string
	jobs    []entry
	cost    int // sum of the queued jobs' costs
	deficit int // DRR credit, in cost units
	weight  int
}

// NewFair returns an empty fair queue configured by s.
func NewFair(s Settings) *Fair {
	q := &Fair{keys: map[string]*keyQueue{}}
	q.Configure(s)
	return q
}

// Roles is the fair queue with the roles it plays: its jobs live in
// memory, and each key holds at most its share.
func (q *Fair) Roles() Roles { return Roles{Queue: q, Memory: q, Shares: q} }

// Configure applies a new bound, per-key bound and weights in place.
func (q *Fair) Configure(s Settings) {
	q.capacity = max(s.Capacity, 0)
	q.keyCap = s.KeyCapacity
	if q.keyCap == 0 {
		q.keyCap = q.capacity
	}
	q.weights = s.Weights
	q.bytes.max = max(s.MaxBytes, 0)
	for _, k := range q.ring {
		k.weight = q.weightOf(k.key)
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
func (q *Fair) Len() int             { return q.fresh + len(q.retries) }
func (q *Fair) Cost() int            { return q.cost }
func (q *Fair) Keys() int            { return len(q.ring) }
func (q *Fair) Cap() int             { return q.capacity }

// keyCost is the cost key holds queued (retries not included).
func (q *Fair) keyCost(key string) int {
	if k := q.keys[key]; k != nil {
		return k.cost
	}
	return 0
}

// Offer appends job to its key's sub-queue, or refuses it with ErrFull when
// its cost does not fit the whole queue's bound, or ErrMaxBytes when its
// payload does not fit the byte bound (the key's share is Share's, checked
// by the caller).
func (q *Fair) Offer(job *Job, at time.Time) Stored {
	c := JobCost(job)
	if err := refuse(q.Fits(c), &q.bytes, job); err != nil {
		return placed(Placed{}, err)
	}
	ahead := q.Ahead(job)
	k := q.keys[job.Key]
	if k == nil {
		k = &keyQueue{key: job.Key, weight: q.weightOf(job.Key)}
		q.keys[job.Key] = k
		if len(q.ring) == 0 {
			q.cur, k.deficit = 0, k.weight
		}
		q.ring = append(q.ring, k)
	}
	k.jobs = append(k.jobs, entry{job, at})
	k.cost += c
	q.fresh++
	q.cost += c
	q.bytes.add(job)
	return placed(Placed{Position: q.Len(), Ahead: ahead}, nil)
}

func (q *Fair) NextReady() (time.Time, bool) {
	var front entry
	ok := len(q.ring) > 0
	if ok {
		front = q.ring[q.cur].jobs[0] // fresh jobs are ready from their enqueue time
	}
	return q.retries.before(front.at, ok)
}

func (q *Fair) Take(now time.Time) (*Job, time.Time, bool) {
	if e, ok := q.retries.popReady(now); ok {
		q.cost -= JobCost(e.job)
		q.bytes.sub(e.job)
		return e.job, e.at, true
	}
	if len(q.ring) == 0 {
		return nil, time.Time{}, false
	}
	k := q.ring[q.cur]
	for k.deficit < JobCost(k.jobs[0].job) { // DRR: the next key's turn
		q.cur = (q.cur + 1) % len(q.ring)
		k = q.ring[q.cur]
		k.deficit += k.weight
	}
	e := k.jobs[0]
	k.jobs[0] = entry{}
	k.jobs = k.jobs[1:]
	c := JobCost(e.job)
	k.deficit -= c
	k.cost -= c
	q.fresh--
	q.cost -= c
	q.bytes.sub(e.job)
	if len(k.jobs) == 0 {
		q.removeAt(q.cur)
	}
	return e.job, e.at, true
}

// removeAt deletes the (empty) key at ring index i. When it was the key
// being served, the next key's turn begins.
func (q *Fair) removeAt(i int) {
	delete(q.keys, q.ring[i].key)
	last := len(q.ring) - 1
	copy(q.ring[i:], q.ring[i+1:])
	q.ring[last] = nil
	q.ring = q.ring[:last]
	switch {
	case len(q.ring) == 0:
		q.ring, q.cur = nil, 0
	case i < q.cur:
		q.cur--
	case i == q.cur:
		q.cur %= len(q.ring)
		q.ring[q.cur].deficit += q.ring[q.cur].weight
	}
}

func (q *Fair) RetryLater(job *Job, at time.Time, _ bool) {
	q.cost += JobCost(job)
	q.bytes.add(job)
	q.retries.add(job, at)
}

// DropFront drops, from the front of every key's sub-queue, jobs while drop
// returns true (deadlines follow queue order within a key).
func (q *Fair) DropFront(drop func(*Job) bool) []*Job {
	var out []*Job
	for i := 0; i < len(q.ring); {
		k := q.ring[i]
		for len(k.jobs) > 0 && drop(k.jobs[0].job) {
			c := JobCost(k.jobs[0].job)
			q.bytes.sub(k.jobs[0].job)
			out = append(out, k.jobs[0].job)
			k.jobs[0] = entry{} // let the job be collected
			k.jobs = k.jobs[1:]
			k.cost -= c
			q.fresh--
			q.cost -= c
		}
		if len(k.jobs) > 0 {
			i++
			continue
		}
		q.removeAt(i)
	}
	return out
}

func (q *Fair) Release() []*Job {
	out := q.retries.jobs(make([]*Job, 0, q.Len()))
	for _, k := range q.ring {
		for _, e := range k.jobs {
			out = append(out, e.job)
		}
	}
	*q = Fair{keys: map[string]*keyQueue{}, capacity: q.capacity, keyCap: q.keyCap, weights: q.weights,
		bytes: byteBound{max: q.bytes.max}}
	return out
}

// Ahead estimates the cost that starts before job if it were offered now:
// the key's own queued cost, then job's.
func (q *Fair) Ahead(job *Job) int {
	own := q.keyCost(job.Key)
	return q.aheadAt(job.Key, own, own+JobCost(job))
}

// Share is job's key's share: what it holds, KeyCapacity, and — when job
// does not fit — the cost that starts before enough of the key's own jobs
// have started to make room for it, with the other keys served in turn.
func (q *Fair) Share(job *Job) Share {
	s := Share{Held: q.keyCost(job.Key), Limit: q.keyCap}
	if c := JobCost(job); s.Over(c) {
		need := s.Held + c - q.keyCap // units of the key's cost that must start first
		s.Ahead = q.aheadAt(job.Key, need-1, need)
	}
	return s
}

// aheadAt estimates the cost that starts before the upto-th unit of cost
// queued for key starts, when before units of the key's own go first: the
// retries, those, and what every other key starts in the rounds the key
// needs (its weight of cost per round). O(active keys).
func (q *Fair) aheadAt(key string, before, upto int) int {
	w := q.weightOf(key)
	rounds := (upto + w - 1) / w
	n := before + q.retries.cost()
	for _, k := range q.ring {
		if k.key != key {
			n += min(k.cost, rounds*k.weight)
		}
	}
	return n
}
