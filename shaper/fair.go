package shaper

import (
	"fmt"
	"time"

	"github.com/shaperd/shaper/queue"
)

// Fair queuing between keys (LaneSettings.Fairness; queue.fairness: key).
// Each admission key (Job.Key; "" is one key too) gets its own FIFO inside
// the lane's bound, and the lane drains them by deficit round robin: a key
// whose turn comes gains its weight (default 1) in credit and starts jobs
// while its credit covers the front job's cost, so over a round each active
// key gets starts in proportion to its weight, whatever the others queued.
// KeyCapacity bounds the cost one key may hold, so one tenant cannot fill
// the whole queue either. Retries go ahead of every key, as on the FIFO
// queue. A key's sub-queue is deleted as soon as it is empty, so the state
// is bounded by the queue's capacity.

// fairQueue is the in-memory Queue with fairness between keys. Not safe for
// concurrent use (the lane's mutex guards it).
type fairQueue struct {
	keys     map[string]*keyQueue
	ring     []*keyQueue // keys with queued jobs, in round-robin order
	cur      int         // index in ring of the key being served
	retries  retryList
	fresh    int // jobs in the keys' sub-queues
	cost     int // sum of every held job's cost, retries included
	capacity int
	keyCap   int
	weights  map[string]int // key → weight; absent = 1
}

// keyQueue is one key's sub-queue.
type keyQueue struct {
	key     string
	jobs    []entry
	cost    int // sum of the queued jobs' costs
	deficit int // DRR credit, in cost units
	weight  int
}

func newFairQueue(cfg LaneSettings) *fairQueue {
	q := &fairQueue{keys: map[string]*keyQueue{}, capacity: cfg.Capacity}
	q.configure(cfg.Beyond)
	return q
}

// configure applies new weights and a new per-key bound in place.
func (q *fairQueue) configure(b Beyond) {
	q.keyCap = cmp0(b.KeyCapacity, q.capacity)
	q.weights = b.Weights
	for _, k := range q.ring {
		k.weight = q.weightOf(k.key)
	}
}

func (q *fairQueue) weightOf(key string) int {
	if w, ok := q.weights[key]; ok {
		return w
	}
	return 1
}

func (q *fairQueue) Len() int     { return q.fresh + len(q.retries) }
func (q *fairQueue) CostLen() int { return q.cost }
func (q *fairQueue) Cap() int     { return q.capacity }
func (q *fairQueue) SetCap(n int) { q.capacity = n }
func (q *fairQueue) Ack(*Job)     {}
func (q *fairQueue) GiveUp(*Job)  {}

// keyCost is the cost key holds queued (retries not included).
func (q *fairQueue) keyCost(key string) int {
	if k := q.keys[key]; k != nil {
		return k.cost
	}
	return 0
}

func (q *fairQueue) Enqueue(job *Job, at time.Time) error {
	c := jobCost(job)
	if q.cost+c > q.capacity {
		return queue.ErrFull
	}
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
	return nil
}

func (q *fairQueue) NextReady() (time.Time, bool) {
	var front entry
	ok := len(q.ring) > 0
	if ok {
		front = q.ring[q.cur].jobs[0] // fresh jobs are ready from their enqueue time
	}
	return q.retries.before(front.at, ok)
}

func (q *fairQueue) Take(now time.Time) (*Job, time.Time, bool) {
	if e, ok := q.retries.popReady(now); ok {
		q.cost -= jobCost(e.job)
		return e.job, e.at, true
	}
	if len(q.ring) == 0 {
		return nil, time.Time{}, false
	}
	k := q.ring[q.cur]
	for k.deficit < jobCost(k.jobs[0].job) { // DRR: the next key's turn
		q.cur = (q.cur + 1) % len(q.ring)
		k = q.ring[q.cur]
		k.deficit += k.weight
	}
	e := k.jobs[0]
	k.jobs[0] = entry{}
	k.jobs = k.jobs[1:]
	c := jobCost(e.job)
	k.deficit -= c
	k.cost -= c
	q.fresh--
	q.cost -= c
	if len(k.jobs) == 0 {
		q.removeAt(q.cur)
	}
	return e.job, e.at, true
}

// removeAt deletes the (empty) key at ring index i. When it was the key
// being served, the next key's turn begins.
func (q *fairQueue) removeAt(i int) {
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

func (q *fairQueue) RetryLater(job *Job, at time.Time, _ bool) {
	q.cost += jobCost(job)
	q.retries.add(job, at)
}

// DropFront drops, from the front of every key's sub-queue, jobs while drop
// returns true (deadlines follow queue order within a key).
func (q *fairQueue) DropFront(drop func(*Job) bool) []*Job {
	var out []*Job
	for i := 0; i < len(q.ring); {
		k := q.ring[i]
		for len(k.jobs) > 0 && drop(k.jobs[0].job) {
			c := jobCost(k.jobs[0].job)
			out = append(out, k.jobs[0].job)
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

func (q *fairQueue) Drain() []*Job {
	out := make([]*Job, 0, q.Len())
	for _, e := range q.retries {
		out = append(out, e.job)
	}
	for _, k := range q.ring {
		for _, e := range k.jobs {
			out = append(out, e.job)
		}
	}
	*q = fairQueue{keys: map[string]*keyQueue{}, capacity: q.capacity, keyCap: q.keyCap, weights: q.weights}
	return out
}

// aheadAt estimates the cost that starts before the upto-th unit of cost
// queued for key starts, when before units of the key's own go first: the
// retries, those, and what every other key starts in the rounds the key
// needs (its weight of cost per round). O(active keys).
func (q *fairQueue) aheadAt(key string, before, upto int) int {
	w := q.weightOf(key)
	rounds := (upto + w - 1) / w
	n := before
	for _, e := range q.retries {
		n += jobCost(e.job)
	}
	for _, k := range q.ring {
		if k.key != key {
			n += min(k.cost, rounds*k.weight)
		}
	}
	return n
}

// checkKeyShare refuses a job whose key already holds its share of the
// queue (KeyCapacity) under fairness, as queue_full. Retry-After is when
// enough of the key's jobs will have started to make room, at the lane's
// rate, with the other keys served in turn. Requires l.mu.
func (l *lane) checkKeyShare(now time.Time, job *Job, rc Receipt) (Receipt, bool) {
	f, ok := l.q.(*fairQueue)
	if !ok {
		return rc, true
	}
	held, c := f.keyCost(job.Key), jobCost(job)
	if held+c <= f.keyCap || l.shadowed(ReasonQueueFull) {
		return rc, true
	}
	need := held + c - f.keyCap // units of the key's cost that must start first
	slots := f.aheadAt(job.Key, need-1, need)
	return l.s.reject(l, rc, ReasonQueueFull, l.freesIn(now, slots+1),
		fmt.Errorf("key holds its share of queue %s (%d/%d)", l.name, held, f.keyCap)), false
}
