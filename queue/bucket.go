package queue

import "time"

// Bucket is the leaky bucket's queue: a FIFO bounded by the cost it holds,
// with a list of retries waiting out their backoff that go ahead of fresh
// jobs once ready. Offer refuses with ErrFull at capacity instead of
// blocking. The zero value is an empty bucket of capacity 0 (every Offer
// fails); use NewBucket. Not safe for concurrent use: the owning lane's
// lock guards it. No method blocks, and Offer/Take do not allocate once the
// ring has grown to the steady-state depth.
type Bucket struct {
	fifo     ring[entry]
	retries  retryList
	cost     int // sum of the held jobs' costs, retries included
	capacity int
	bytes    byteBound
}

var (
	_ Queue  = (*Bucket)(nil)
	_ Memory = (*Bucket)(nil)
)

// NewBucket returns an empty bucket bounded by s.Capacity.
func NewBucket(s Settings) *Bucket {
	b := &Bucket{}
	b.Configure(s)
	return b
}

// Roles is the bucket with the roles it plays: its jobs live in memory.
func (b *Bucket) Roles() Roles { return Roles{Queue: b, Memory: b} }

// Offer appends job at the back, or refuses it, changing nothing, with
// ErrFull when its cost does not fit or ErrMaxBytes when its payload does
// not.
func (b *Bucket) Offer(job *Job, at time.Time) Stored {
	c := JobCost(job)
	if err := refuse(b.Fits(c), &b.bytes, job); err != nil {
		return placed(Placed{}, err)
	}
	ahead := b.cost
	b.fifo.pushBack(entry{job, at})
	b.cost += c
	b.bytes.add(job)
	return placed(Placed{Position: b.Len(), Ahead: ahead}, nil)
}

func (b *Bucket) Fits(need int) bool   { return b.cost+need <= b.capacity }
func (b *Bucket) Ahead(*Job) int       { return b.cost }
func (b *Bucket) Len() int             { return b.fifo.len() + len(b.retries) }
func (b *Bucket) Cost() int            { return b.cost }
func (b *Bucket) Cap() int             { return b.capacity }
func (b *Bucket) FitsBytes(n int) bool { return b.bytes.fits(n) }
func (b *Bucket) Bytes() int64         { return b.bytes.held }
func (b *Bucket) Configure(s Settings) {
	b.capacity, b.bytes.max = max(s.Capacity, 0), max(s.MaxBytes, 0)
}

func (b *Bucket) NextReady() (time.Time, bool) {
	front, ok := b.fifo.peek()
	return b.retries.before(front.at, ok)
}

func (b *Bucket) Take(now time.Time) (*Job, time.Time, bool) {
	e, ok := b.retries.popReady(now)
	if !ok {
		e, ok = b.fifo.poll()
	}
	if !ok {
		return nil, time.Time{}, false
	}
	b.cost -= JobCost(e.job)
	b.bytes.sub(e.job)
	return e.job, e.at, true
}

func (b *Bucket) RetryLater(job *Job, at time.Time, _ bool) {
	b.cost += JobCost(job)
	b.bytes.add(job)
	b.retries.add(job, at)
}

func (b *Bucket) DropFront(drop func(*Job) bool) []*Job {
	var out []*Job
	for {
		e, ok := b.fifo.peek()
		if !ok || !drop(e.job) {
			return out
		}
		b.fifo.poll()
		b.cost -= JobCost(e.job)
		b.bytes.sub(e.job)
		out = append(out, e.job)
	}
}

func (b *Bucket) Release() []*Job {
	out := b.retries.jobs(make([]*Job, 0, b.Len()))
	b.retries, b.cost, b.bytes.held = nil, 0, 0
	for e, ok := b.fifo.poll(); ok; e, ok = b.fifo.poll() {
		out = append(out, e.job)
	}
	return out
}
