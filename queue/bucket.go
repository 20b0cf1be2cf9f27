package queue

import "errors"

// ErrFull is returned by Offer when the bucket is at (or above) capacity.
var ErrFull = errors.New("queue: full")

// minAlloc is the smallest ring allocated; the ring grows by doubling up to
// what the queued items need, so a large capacity costs nothing until used.
const minAlloc = 16

// Bucket is a bounded FIFO of T backed by a ring buffer. Offer appends at the
// back and refuses with ErrFull at capacity; Poll removes from the front;
// PushFront puts an item back at the front and may exceed the capacity (the
// item was already accepted once, e.g. a retried job).
//
// The zero value is an empty bucket with capacity 0 (every Offer fails);
// use NewBucket or SetCap. A Bucket is not safe for concurrent use: the owner
// serialises access (the shaper holds its lane's mutex). No method blocks,
// and Offer/Poll do not allocate once the ring has grown to the steady-state
// depth.
type Bucket[T any] struct {
	buf  []T // ring; len(buf) is a power of two or 0
	head int // index of the front item
	n    int // items held
	cap  int // bound enforced by Offer
}

// NewBucket returns an empty bucket holding at most capacity items
// (capacity < 0 is treated as 0).
func NewBucket[T any](capacity int) *Bucket[T] {
	b := &Bucket[T]{}
	b.SetCap(capacity)
	return b
}

// Len returns the number of items held (possibly above Cap after PushFront
// or a shrinking SetCap).
func (b *Bucket[T]) Len() int { return b.n }

// Cap returns the bound enforced by Offer.
func (b *Bucket[T]) Cap() int { return b.cap }

// Full reports whether Offer would refuse now.
func (b *Bucket[T]) Full() bool { return b.n >= b.cap }

// SetCap changes the bound. Shrinking never drops held items: Offer refuses
// until Len is below the new bound. capacity < 0 is treated as 0.
func (b *Bucket[T]) SetCap(capacity int) { b.cap = max(capacity, 0) }

// Offer appends v at the back, or returns ErrFull without change when
// Len() >= Cap().
func (b *Bucket[T]) Offer(v T) error {
	if b.n >= b.cap {
		return ErrFull
	}
	b.grow()
	b.buf[(b.head+b.n)&(len(b.buf)-1)] = v
	b.n++
	return nil
}

// PushFront puts v at the front, ahead of every held item, regardless of
// the bound.
func (b *Bucket[T]) PushFront(v T) {
	b.grow()
	b.head = (b.head - 1) & (len(b.buf) - 1)
	b.buf[b.head] = v
	b.n++
}

// Poll removes and returns the front item; ok is false when empty.
func (b *Bucket[T]) Poll() (v T, ok bool) {
	if b.n == 0 {
		return v, false
	}
	var zero T
	v = b.buf[b.head]
	b.buf[b.head] = zero // release the reference for the GC
	b.head = (b.head + 1) & (len(b.buf) - 1)
	b.n--
	return v, true
}

// Peek returns the front item without removing it; ok is false when empty.
func (b *Bucket[T]) Peek() (v T, ok bool) {
	if b.n == 0 {
		return v, false
	}
	return b.buf[b.head], true
}

// grow makes room for one more item, doubling the ring when it is full.
func (b *Bucket[T]) grow() {
	if b.n < len(b.buf) {
		return
	}
	size := max(minAlloc, 2*len(b.buf))
	buf := make([]T, size)
	for i := range b.n {
		buf[i] = b.buf[(b.head+i)&(len(b.buf)-1)]
	}
	b.buf, b.head = buf, 0
}
