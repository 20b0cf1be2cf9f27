package outbox

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBackoff(t *testing.T) {
	for _, tt := range []struct {
		fails int
		want  time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {5, 16 * time.Second}, {6, 30 * time.Second}, {60, 30 * time.Second}} {
		if got := Backoff(tt.fails); got != tt.want {
			t.Errorf("Backoff(%d) = %v, want %v", tt.fails, got, tt.want)
		}
	}
}

// item is "key/n".
type item struct{ key, n string }

// handler takes items, refusing a key's while down[key] is set, and
// records when each was handled, offsets from t0.
type handler struct {
	mu        sync.Mutex
	t0        time.Time
	down      map[string]bool
	handled   []string
	tries     []time.Duration // every try of a refused key, by time
	abandoned []string
}

func (h *handler) Key(it item) string { return it.key }
func (h *handler) Handle(_ context.Context, it item) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down[it.key] {
		h.tries = append(h.tries, time.Since(h.t0))
		return false
	}
	h.handled = append(h.handled, it.key+"/"+it.n)
	return true
}
func (h *handler) Abandon(it item) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.abandoned = append(h.abandoned, it.key+"/"+it.n)
}
func (h *handler) set(key string, down bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.down[key] = down
}

// TestOrderAndRetry: items of a key are handled in order; a refused key's
// backlog waits 1 s, 2 s, 4 s… while other keys go on; Stop returns once
// everything was taken.
func TestOrderAndRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &handler{t0: time.Now(), down: map[string]bool{"b": true}}
		o := New[item](h, func() time.Duration { return time.Hour }, func() { t.Error("late called within the grace") })
		if err := o.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		for _, it := range []item{{"a", "1"}, {"b", "1"}, {"a", "2"}, {"b", "2"}, {"a", "3"}} {
			o.Add(it)
		}
		time.Sleep(5 * time.Second) // tries of b at 0, 1 s, 3 s
		h.set("b", false)
		_ = o.Stop() // b's next try at 7 s
		if want := []string{"a/1", "a/2", "a/3", "b/1", "b/2"}; !slices.Equal(h.handled, want) {
			t.Errorf("handled %v, want %v", h.handled, want)
		}
		if want := []time.Duration{0, time.Second, 3 * time.Second}; !slices.Equal(h.tries, want) {
			t.Errorf("b tried at %v, want %v", h.tries, want)
		}
		if d := time.Since(h.t0); d != 7*time.Second {
			t.Errorf("Stop returned after %v, want 7s", d)
		}
	})
}

// TestAbandon: once Stop's grace ran out, late is called and what is left
// is abandoned in order.
func TestAbandon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &handler{t0: time.Now(), down: map[string]bool{"a": true}}
		late := false
		o := New[item](h, func() time.Duration { return 1500 * time.Millisecond }, func() { late = true })
		if err := o.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		o.Add(item{"a", "1"})
		o.Add(item{"a", "2"})
		time.Sleep(time.Second / 2)
		_ = o.Stop()
		if !late || time.Since(h.t0) != 2*time.Second {
			t.Errorf("late %v, Stop returned after %v; want late, at 2s (0.5 s + the grace)", late, time.Since(h.t0))
		}
		if want := []string{"a/1", "a/2"}; !slices.Equal(h.abandoned, want) {
			t.Errorf("abandoned %v, want %v", h.abandoned, want)
		}
		if len(h.handled) != 0 {
			t.Errorf("handled %v, want none", h.handled)
		}
	})
}
