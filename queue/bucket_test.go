package queue

import (
	"errors"
	"sync"
	"testing"
)

func TestBucketFIFOAndBound(t *testing.T) {
	b := NewBucket[int](3)
	for i := 1; i <= 3; i++ {
		if err := b.Offer(i); err != nil {
			t.Fatalf("Offer(%d) = %v", i, err)
		}
	}
	if err := b.Offer(4); !errors.Is(err, ErrFull) {
		t.Fatalf("Offer at capacity = %v, want ErrFull", err)
	}
	if !b.Full() || b.Len() != 3 || b.Cap() != 3 {
		t.Fatalf("Full=%v Len=%d Cap=%d", b.Full(), b.Len(), b.Cap())
	}
	for want := 1; want <= 3; want++ {
		if v, ok := b.Poll(); !ok || v != want {
			t.Fatalf("Poll = %d,%v want %d", v, ok, want)
		}
	}
	if _, ok := b.Poll(); ok {
		t.Fatal("Poll on empty returned ok")
	}
	if _, ok := b.Peek(); ok {
		t.Fatal("Peek on empty returned ok")
	}
}

func TestBucketPushFrontMayExceedCap(t *testing.T) {
	b := NewBucket[string](2)
	_ = b.Offer("a")
	_ = b.Offer("b")
	b.PushFront("retry")
	if b.Len() != 3 {
		t.Fatalf("Len = %d, want 3", b.Len())
	}
	if err := b.Offer("c"); !errors.Is(err, ErrFull) {
		t.Fatalf("Offer above cap = %v", err)
	}
	for _, want := range []string{"retry", "a", "b"} {
		if v, _ := b.Poll(); v != want {
			t.Fatalf("Poll = %q, want %q", v, want)
		}
	}
}

func TestBucketSetCapShrinkKeepsItems(t *testing.T) {
	b := NewBucket[int](5)
	for i := range 5 {
		_ = b.Offer(i)
	}
	b.SetCap(2)
	if b.Len() != 5 {
		t.Fatalf("shrink dropped items: Len = %d", b.Len())
	}
	for range 3 {
		b.Poll()
		if err := b.Offer(9); !errors.Is(err, ErrFull) {
			t.Fatalf("Offer while above new cap = %v", err)
		}
	}
	b.Poll() // Len 1 < 2
	if err := b.Offer(9); err != nil {
		t.Fatalf("Offer below new cap = %v", err)
	}
	b.SetCap(-1)
	if b.Cap() != 0 {
		t.Fatalf("Cap = %d", b.Cap())
	}
}

func TestBucketZeroValueRefuses(t *testing.T) {
	var b Bucket[int]
	if err := b.Offer(1); !errors.Is(err, ErrFull) {
		t.Fatalf("zero Bucket Offer = %v", err)
	}
	b.PushFront(7)
	if v, ok := b.Poll(); !ok || v != 7 {
		t.Fatalf("Poll = %d,%v", v, ok)
	}
}

// TestBucketWrapAndGrow interleaves operations across ring wrap-around and
// growth and checks the order against a slice model.
func TestBucketWrapAndGrow(t *testing.T) {
	b := NewBucket[int](1000)
	var model []int
	next := 0
	for step := range 5000 {
		switch {
		case step%7 == 3 && len(model) > 0:
			v, _ := b.Poll()
			b.PushFront(v) // no-op on order
		case step%3 == 0 && len(model) > 0:
			v, ok := b.Poll()
			if !ok || v != model[0] {
				t.Fatalf("step %d: Poll = %d,%v want %d", step, v, ok, model[0])
			}
			model = model[1:]
		default:
			if b.Offer(next) == nil {
				model = append(model, next)
			}
			next++
		}
		if b.Len() != len(model) {
			t.Fatalf("step %d: Len = %d want %d", step, b.Len(), len(model))
		}
		if v, ok := b.Peek(); ok && v != model[0] {
			t.Fatalf("step %d: Peek = %d want %d", step, v, model[0])
		}
	}
}

func TestBucketSteadyStateNoAlloc(t *testing.T) {
	b := NewBucket[*int](64)
	x := 1
	for range 64 {
		_ = b.Offer(&x)
	}
	for range 64 {
		b.Poll()
	}
	allocs := testing.AllocsPerRun(1000, func() {
		_ = b.Offer(&x)
		b.Poll()
		b.PushFront(&x)
		b.Poll()
	})
	if allocs != 0 {
		t.Fatalf("allocs per Offer/Poll = %v, want 0", allocs)
	}
}

func BenchmarkBucketOfferPoll(b *testing.B) {
	q := NewBucket[*int](1024)
	x := 1
	b.ReportAllocs()
	for b.Loop() {
		_ = q.Offer(&x)
		q.Poll()
	}
}

// BenchmarkBucketOfferPollParallel measures the bucket under a mutex, as the
// shaper uses it, with every goroutine offering and polling.
func BenchmarkBucketOfferPollParallel(b *testing.B) {
	for _, depth := range []int{0, 100} {
		b.Run(map[int]string{0: "empty", 100: "depth100"}[depth], func(b *testing.B) {
			var mu sync.Mutex
			q := NewBucket[*int](1 << 16)
			x := 1
			for range depth {
				_ = q.Offer(&x)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					mu.Lock()
					_ = q.Offer(&x)
					mu.Unlock()
					mu.Lock()
					q.Poll()
					mu.Unlock()
				}
			})
		})
	}
}
