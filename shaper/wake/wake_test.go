package wake

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// item records the instants it was run at, offsets from t0.
type item struct {
	mu   sync.Mutex
	t0   time.Time
	runs []time.Duration
	then func(now time.Time) // called after recording, if set
}

func (it *item) RunDue(now time.Time) {
	it.mu.Lock()
	it.runs = append(it.runs, now.Sub(it.t0))
	then := it.then
	it.mu.Unlock()
	if then != nil {
		then(now)
	}
}

func (it *item) got() []time.Duration {
	it.mu.Lock()
	defer it.mu.Unlock()
	return append([]time.Duration(nil), it.runs...)
}

// want is one WantAt call at a fake-time offset.
type want struct {
	at   time.Duration // when the call is made
	wake time.Duration // the time asked for
	ok   bool
}

// TestWakes drives one item with WantAt calls at fixed instants and checks
// it runs at exactly the instants asked, and only those.
func TestWakes(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name  string
		wants []want
		runs  []time.Duration
	}{
		{"once", []want{{0, 100 * ms, true}}, []time.Duration{100 * ms}},
		{"due now", []want{{0, 0, true}}, []time.Duration{0}},
		{"in the past", []want{{50 * ms, 10 * ms, true}}, []time.Duration{50 * ms}},
		{"re-armed earlier", []want{{0, 300 * ms, true}, {10 * ms, 120 * ms, true}}, []time.Duration{120 * ms}},
		{"re-armed later", []want{{0, 100 * ms, true}, {10 * ms, 250 * ms, true}}, []time.Duration{250 * ms}},
		{"unscheduled", []want{{0, 100 * ms, true}, {50 * ms, 0, false}}, nil},
		{"unscheduled then asked again", []want{{0, 100 * ms, true}, {50 * ms, 0, false}, {60 * ms, 200 * ms, true}},
			[]time.Duration{200 * ms}},
		{"asked again after running", []want{{0, 100 * ms, true}, {150 * ms, 180 * ms, true}},
			[]time.Duration{100 * ms, 180 * ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New[*item]()
				it := &item{t0: time.Now()}
				h := NewHandle(it)
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() { s.Run(ctx); close(done) }()
				for _, w := range tt.wants {
					time.Sleep(time.Until(it.t0.Add(w.at)))
					s.WantAt(h, it.t0.Add(w.wake), w.ok)
				}
				time.Sleep(time.Until(it.t0.Add(time.Second)))
				cancel()
				<-done
				if got := it.got(); !slices.Equal(got, tt.runs) {
					t.Fatalf("ran at %v, want %v", got, tt.runs)
				}
			})
		})
	}
}

// TestOrder runs several items each at its own instant, in time order,
// with one timer, and lets an item re-arm itself from RunDue.
func TestOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New[*item]()
		t0 := time.Now()
		a, b, c := &item{t0: t0}, &item{t0: t0}, &item{t0: t0}
		ha, hb, hc := NewHandle(a), NewHandle(b), NewHandle(c)
		n := 0
		a.then = func(now time.Time) { // every 100 ms, three times
			if n++; n < 3 {
				s.WantAt(ha, now.Add(100*time.Millisecond), true)
			}
		}
		s.WantAt(hc, t0.Add(250*time.Millisecond), true)
		s.WantAt(ha, t0.Add(100*time.Millisecond), true)
		s.WantAt(hb, t0.Add(150*time.Millisecond), true)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		time.Sleep(time.Second)
		cancel()
		<-done
		ms := time.Millisecond
		for _, tt := range []struct {
			name string
			it   *item
			want []time.Duration
		}{
			{"a", a, []time.Duration{100 * ms, 200 * ms, 300 * ms}},
			{"b", b, []time.Duration{150 * ms}},
			{"c", c, []time.Duration{250 * ms}},
		} {
			if got := tt.it.got(); !slices.Equal(got, tt.want) {
				t.Errorf("%s ran at %v, want %v", tt.name, got, tt.want)
			}
		}
	})
}

type nop struct{}

func (nop) RunDue(time.Time) {}

// TestHeapOrder schedules, moves and withdraws many handles at random and
// checks that popDue returns exactly those due, earliest first, and that
// every handle knows its place.
func TestHeapOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := New[nop]()
	t0 := time.Now()
	hs := make([]*Handle[nop], 500)
	want := map[*Handle[nop]]time.Time{}
	for i := range hs {
		hs[i] = NewHandle(nop{})
	}
	for round := range 200 {
		for range 300 {
			h := hs[rng.IntN(len(hs))]
			if rng.IntN(5) == 0 {
				s.WantAt(h, time.Time{}, false)
				delete(want, h)
				continue
			}
			at := t0.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
			s.WantAt(h, at, true)
			want[h] = at
		}
		for i, e := range s.items {
			if e.h.idx != i {
				t.Fatalf("round %d: entry %d has idx %d", round, i, e.h.idx)
			}
		}
		now := t0.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
		var last time.Time
		for _, h := range s.popDue(now) {
			at, ok := want[h]
			if !ok || at.After(now) || at.Before(last) || h.idx != -1 {
				t.Fatalf("round %d: popped a handle wanted at %v (ok %v, idx %d) at %v after %v", round, at, ok, h.idx, now, last)
			}
			last = at
			delete(want, h)
		}
		for h, at := range want {
			if !at.After(now) || h.idx < 0 {
				t.Fatalf("round %d: a handle wanted at %v left at %v (idx %d)", round, at, now, h.idx)
			}
		}
		if len(s.items) != len(want) {
			t.Fatalf("round %d: %d in the heap, want %d", round, len(s.items), len(want))
		}
	}
}

// TestBaseZeroTime: the heap's keys count from the first time asked for,
// which may be the zero time (due at once) as well as a clock reading.
func TestBaseZeroTime(t *testing.T) {
	s := New[nop]()
	t0 := time.Now()
	early, late := NewHandle(nop{}), NewHandle(nop{})
	s.WantAt(early, time.Time{}, true)
	s.WantAt(late, t0.Add(time.Second), true)
	if got := s.popDue(t0); len(got) != 1 || got[0] != early {
		t.Fatalf("at t0: popped %d handles, want only the zero-time one", len(got))
	}
	if got := s.popDue(t0.Add(time.Second - 1)); len(got) != 0 {
		t.Fatalf("before its time: popped %d handles, want none", len(got))
	}
	if at, ok := s.arm(); !ok || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("arm = %v, %v; want %v", at, ok, t0.Add(time.Second))
	}
	if got := s.popDue(t0.Add(time.Second)); len(got) != 1 || got[0] != late {
		t.Fatalf("at its time: popped %d handles, want the other", len(got))
	}
}
