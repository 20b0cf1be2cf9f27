package keep

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shaperd/shaper/shaper/policy"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memRates is a Rates in memory; fail is returned by every call when set.
type memRates struct {
	mu    sync.Mutex
	kept  map[string]policy.Learned
	saves int
	fail  error
}

func (m *memRates) Load(_ context.Context, name string) (policy.Learned, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.kept[name]
	return v, ok, m.fail
}

func (m *memRates) Save(_ context.Context, name string, v policy.Learned) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.kept[name] = v
	m.saves++
	return nil
}

// fakeLane is a Lane whose value is due while due is set.
type fakeLane struct {
	mu       sync.Mutex
	name     string
	v        policy.Learned
	due      bool
	saved    []uint64 // marks handed back to Saved
	reloaded []policy.Learned
}

func (l *fakeLane) KeptName() string { return l.name }

func (l *fakeLane) ToSave(now time.Time) (policy.Learned, uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.v
	v.At = now
	return v, uint64(len(l.saved) + 1), l.due
}

func (l *fakeLane) Saved(_ policy.Learned, mark uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.saved = append(l.saved, mark)
	l.due = false
}

func (l *fakeLane) Reloaded(v policy.Learned, ok bool, _ time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ok {
		l.reloaded = append(l.reloaded, v)
	}
}

func TestNewWithoutRates(t *testing.T) {
	if k := New(nil, slog.New(slog.DiscardHandler), nil); k != nil {
		t.Fatalf("New(nil) = %v, want nil (nothing kept)", k)
	}
}

// TestKeeperSaves: a due value is saved at the next tick and marked
// saved; one not due is not; the last save comes when Run ends.
func TestKeeperSaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &memRates{kept: map[string]policy.Learned{}}
		a := &fakeLane{name: "a", v: policy.Learned{Rate: 5}, due: true}
		b := &fakeLane{name: "b", v: policy.Learned{Rate: 7}}
		k := New(r, slog.New(slog.DiscardHandler), func() []Lane { return []Lane{a, b} })
		if err := k.Start(t.Context()); err != nil {
			t.Fatal(err)
		}

		time.Sleep(Every + time.Millisecond)
		synctest.Wait()
		if got := r.kept["a"].Rate; got != 5 || len(a.saved) != 1 || a.saved[0] != 1 {
			t.Fatalf("after one tick: kept a %v, marks %v; want rate 5 saved with mark 1", got, a.saved)
		}
		if _, ok := r.kept["b"]; ok {
			t.Fatal("b's value was saved though it was not due")
		}
		b.mu.Lock()
		b.due = true
		b.mu.Unlock()
		_ = k.Stop()
		if got := r.kept["b"].Rate; got != 7 {
			t.Fatalf("after Run ended: kept b %v, want the final save of 7", got)
		}
	})
}

// TestKeeperTakeover: a takeover read hands the lane the kept value; Ask
// refuses once maxTakeovers reads wait.
func TestKeeperTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &memRates{kept: map[string]policy.Learned{"a": {Rate: 3}}}
		a := &fakeLane{name: "a"}
		k := New(r, slog.New(slog.DiscardHandler), func() []Lane { return nil })
		for i := range maxTakeovers {
			if !k.Ask(a) {
				t.Fatalf("Ask %d refused below maxTakeovers", i)
			}
		}
		if k.Ask(a) {
			t.Fatal("Ask accepted past maxTakeovers; want false (the lane goes on unread)")
		}
		if err := k.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		_ = k.Stop()
		if len(a.reloaded) != maxTakeovers || a.reloaded[0].Rate != 3 {
			t.Fatalf("reloaded %d values (first %v), want %d of rate 3", len(a.reloaded), a.reloaded, maxTakeovers)
		}
	})
}

// TestKeeperStoreDown: failed saves are retried and warned of at most once
// a minute; Load logs each failure and answers what the store said.
func TestKeeperStoreDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		r := &memRates{kept: map[string]policy.Learned{}, fail: errors.New("store down")}
		a := &fakeLane{name: "a", v: policy.Learned{Rate: 5}, due: true}
		k := New(r, slog.New(slog.NewTextHandler(&logs, nil)), func() []Lane { return []Lane{a} })
		if err := k.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * Every)
		synctest.Wait()
		_ = k.Stop()
		if n := strings.Count(logs.String(), "saving the learned rate failed"); n != 1 {
			t.Fatalf("%d warnings in %s, want 1 (at most once a minute):\n%s", n, 10*Every, logs.String())
		}
		if len(a.saved) != 0 {
			t.Fatalf("marked saved %v though every save failed", a.saved)
		}
		if got := k.Load(nil); got != nil {
			t.Fatalf("Load(nil) = %v, want nil", got)
		}
		got := k.Load([]string{"a", "b"})
		if len(got) != 2 || got["a"].OK || got["b"].OK {
			t.Fatalf("Load with the store down = %v, want both read as nothing kept", got)
		}
		if n := strings.Count(logs.String(), "reading the kept rate failed"); n != 2 {
			t.Fatalf("%d read warnings, want one per downstream:\n%s", n, logs.String())
		}
	})
}
