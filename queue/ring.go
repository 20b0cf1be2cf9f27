package queue

// minAlloc is the smallest ring allocated; the ring grows by doubling up to
// what the held items need, so a large capacity costs nothing until used.
const minAlloc = 16

// ring is an unbounded FIFO of T backed by a power-of-two ring buffer: the
// storage under Bucket. The zero value is empty. Not safe for concurrent
// use; no method blocks, and pushBack/poll do not allocate once the ring
// has grown to the steady-state depth.
type ring[T any] struct {
	buf  []T // len(buf) is a power of two or 0
	head int // index of the front item
	n    int // items held
}

func (r *ring[T]) len() int { return r.n }

// pushBack appends v at the back.
func (r *ring[T]) pushBack(v T) {
	r.grow()
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = v
	r.n++
}

// poll removes and returns the front item; ok is false when empty.
func (r *ring[T]) poll() (v T, ok bool) {
	if r.n == 0 {
		return v, false
	}
	var zero T
	v = r.buf[r.head]
	r.buf[r.head] = zero // release the reference for the GC
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return v, true
}

// peek returns the front item without removing it; ok is false when empty.
func (r *ring[T]) peek() (v T, ok bool) {
	if r.n == 0 {
		return v, false
	}
	return r.buf[r.head], true
}

// grow makes room for one more item, doubling the ring when it is full.
func (r *ring[T]) grow() {
	if r.n < len(r.buf) {
		return
	}
	size := max(minAlloc, 2*len(r.buf))
	buf := make([]T, size)
	for i := range r.n {
		buf[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
	}
	r.buf, r.head = buf, 0
}

// at returns the i-th item from the front (0 ≤ i < len).
func (r *ring[T]) at(i int) T { return r.buf[(r.head+i)&(len(r.buf)-1)] }

// removeAt removes and returns the i-th item from the front (0 ≤ i < len),
// moving the items before it one place back: the others keep their order.
func (r *ring[T]) removeAt(i int) T {
	mask := len(r.buf) - 1
	v := r.at(i)
	for j := i; j > 0; j-- {
		r.buf[(r.head+j)&mask] = r.buf[(r.head+j-1)&mask]
	}
	var zero T
	r.buf[r.head] = zero // release the reference for the GC
	r.head = (r.head + 1) & mask
	r.n--
	return v
}
