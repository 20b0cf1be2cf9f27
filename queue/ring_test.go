package queue

import "testing"

// TestRingWrapAndGrow interleaves operations across wrap-around and growth
// and checks the order against a slice model.
func TestRingWrapAndGrow(t *testing.T) {
	var r ring[int]
	var model []int
	next := 0
	for step := range 5000 {
		if step%3 == 0 && len(model) > 0 {
			v, ok := r.poll()
			if !ok || v != model[0] {
				t.Fatalf("step %d: poll = %d,%v want %d", step, v, ok, model[0])
			}
			model = model[1:]
		} else if len(model) < 1000 {
			r.pushBack(next)
			model = append(model, next)
			next++
		}
		if r.len() != len(model) {
			t.Fatalf("step %d: len = %d want %d", step, r.len(), len(model))
		}
		if v, ok := r.peek(); ok && v != model[0] {
			t.Fatalf("step %d: peek = %d want %d", step, v, model[0])
		}
	}
	for range model {
		r.poll()
	}
	if _, ok := r.poll(); ok {
		t.Fatal("poll on empty returned ok")
	}
	if _, ok := r.peek(); ok {
		t.Fatal("peek on empty returned ok")
	}
}

func TestRingSteadyStateNoAlloc(t *testing.T) {
	var r ring[*int]
	x := 1
	for range 64 {
		r.pushBack(&x)
	}
	for range 64 {
		r.poll()
	}
	allocs := testing.AllocsPerRun(1000, func() {
		r.pushBack(&x)
		r.poll()
	})
	if allocs != 0 {
		t.Fatalf("allocs per pushBack/poll = %v, want 0", allocs)
	}
}
