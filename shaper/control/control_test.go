package control

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shaperd/shaper/shaper"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *time.Time { t := t0.Add(d); return &t }

func TestStateSame(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b State
		want bool
	}{
		{"both zero", State{}, State{}, true},
		{"who changed it does not count", State{By: "a"}, State{By: "b"}, true},
		{"paused and not", State{Paused: true}, State{}, false},
		{"a timed pause already over is no pause", State{Paused: true, Until: at(-time.Second)}, State{}, true},
		{"timed and untimed", State{Paused: true, Until: at(time.Minute)}, State{Paused: true}, false},
		{"same end", State{Paused: true, Until: at(time.Minute)}, State{Paused: true, Until: at(time.Minute)}, true},
		{"other end", State{Paused: true, Until: at(time.Minute)}, State{Paused: true, Until: at(time.Hour)}, false},
		{"other override", State{Override: shaper.Override{Rate: 2}}, State{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.same(tc.b, t0); got != tc.want {
				t.Errorf("same = %v, want %v", got, tc.want)
			}
		})
	}
}

// fakeShaper holds one lane's pause and override, as a Shaper does.
type fakeShaper struct {
	mu     sync.Mutex
	paused bool
	until  *time.Time
	ovr    shaper.Override
}

func (f *fakeShaper) Lanes() []shaper.LaneStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := shaper.LaneStatus{Name: "a", Paused: f.paused, PausedUntil: f.until}
	if !f.ovr.IsZero() {
		o := f.ovr
		st.Override = &o
	}
	return []shaper.LaneStatus{st}
}

func (f *fakeShaper) known(name string) error {
	if name != "a" {
		return shaper.ErrUnknownDownstream
	}
	return nil
}

func (f *fakeShaper) SetOverride(name string, o shaper.Override) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ovr = o
	return f.known(name)
}

func (f *fakeShaper) PauseUntil(name string, until time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paused, f.until = true, nil
	if !until.IsZero() {
		f.until = &until
	}
	return f.known(name)
}

func (f *fakeShaper) Resume(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paused, f.until = false, nil
	return f.known(name)
}

// memStore is a Store in memory; Watch hands over what it holds, then
// whatever is sent on updates.
type memStore struct {
	mu      sync.Mutex
	kept    map[string]State
	fail    error
	updates chan State
}

func (m *memStore) Put(_ context.Context, name string, s State) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.kept[name] = s
	return nil
}

func (m *memStore) Watch(ctx context.Context, follow func(string, State), loaded chan<- struct{}) {
	m.mu.Lock()
	kept := m.kept
	m.mu.Unlock()
	for name, s := range kept {
		follow(name, s)
	}
	close(loaded)
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-m.updates:
			follow("a", s)
		}
	}
}

func TestChangesKeptAndUndone(t *testing.T) {
	sh := &fakeShaper{}
	st := &memStore{kept: map[string]State{}}
	c := New(sh, st, func(string) bool { return true }, slog.New(slog.DiscardHandler))

	if err := c.SetOverride("a", shaper.Override{Rate: 5}, "ops"); err != nil {
		t.Fatalf("SetOverride: %v", err)
	}
	if err := c.Pause("a", time.Time{}, "ops"); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if got := st.kept["a"]; !got.Paused || got.Override.Rate != 5 || got.By != "ops" {
		t.Fatalf("kept %+v, want paused with rate 5 by ops", got)
	}
	if err := c.Resume("b", "ops"); !errors.Is(err, shaper.ErrUnknownDownstream) {
		t.Fatalf("Resume of an unknown downstream: %v, want ErrUnknownDownstream", err)
	}

	st.fail = errors.New("store down")
	err := c.ClearOverride("a", "ops")
	if err == nil || !strings.Contains(err.Error(), "nothing changed") {
		t.Fatalf("ClearOverride with the store down: %v, want an error saying nothing changed", err)
	}
	if sh.ovr.Rate != 5 || !sh.paused {
		t.Fatalf("after a refused change the shaper holds override %+v, paused %v; want it undone", sh.ovr, sh.paused)
	}
}

func TestNotSharedStaysHere(t *testing.T) {
	sh := &fakeShaper{}
	st := &memStore{kept: map[string]State{}, fail: errors.New("never asked")}
	c := New(sh, st, func(string) bool { return false }, slog.New(slog.DiscardHandler))
	if err := c.Pause("a", t0.Add(time.Hour), "ops"); err != nil {
		t.Fatalf("Pause of a downstream not shared: %v", err)
	}
	if !sh.paused || sh.until == nil || !sh.until.Equal(t0.Add(time.Hour)) {
		t.Fatalf("shaper paused %v until %v, want until %s", sh.paused, sh.until, t0.Add(time.Hour))
	}
}

func TestStartFollowsTheStore(t *testing.T) {
	sh := &fakeShaper{}
	st := &memStore{kept: map[string]State{"a": {Paused: true, By: "other"}}, updates: make(chan State)}
	c := New(sh, st, func(string) bool { return true }, slog.New(slog.DiscardHandler))
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if !sh.Lanes()[0].Paused {
		t.Fatal("Start returned before the kept pause applied")
	}
	st.updates <- State{Override: shaper.Override{Capacity: 7}}
	st.updates <- State{Override: shaper.Override{Capacity: 7}} // the first is followed once this is taken
	if got := sh.Lanes()[0]; got.Paused || got.Override == nil || got.Override.Capacity != 7 {
		t.Fatalf("after another instance's change: %+v, want resumed with capacity 7", got)
	}

	sh.mu.Lock()
	sh.ovr = shaper.Override{} // as a reload that dropped and brought back the lane
	sh.mu.Unlock()
	c.Reapply()
	if got := sh.Lanes()[0]; got.Override == nil || got.Override.Capacity != 7 {
		t.Fatalf("after Reapply: %+v, want capacity 7 again", got)
	}
}

// TestFollowsOnceShared: without a shared downstream at Start the store is
// not followed; a reload that brings one (Reapply) starts following it.
func TestFollowsOnceShared(t *testing.T) {
	sh := &fakeShaper{}
	st := &memStore{kept: map[string]State{"a": {Paused: true, By: "other"}}, updates: make(chan State)}
	var mu sync.Mutex
	shared := false
	c := New(sh, st, func(string) bool { mu.Lock(); defer mu.Unlock(); return shared }, slog.New(slog.DiscardHandler))
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	c.Reapply()
	if sh.Lanes()[0].Paused {
		t.Fatal("the store was followed with no shared downstream")
	}
	mu.Lock()
	shared = true
	mu.Unlock()
	c.Reapply()
	for range 2 { // the second is taken once the kept state was followed
		select {
		case st.updates <- State{Paused: true, By: "other"}:
		case <-time.After(10 * time.Second):
			t.Fatal("the store is not followed after a reload brought a shared downstream")
		}
	}
	if !sh.Lanes()[0].Paused {
		t.Fatal("after a reload brought a shared downstream the kept pause did not apply")
	}
}

// TestFollowLogsReadableOverride: the line for another instance's change
// names the override's set fields as the config writes them, not a struct.
func TestFollowLogsReadableOverride(t *testing.T) {
	for _, tc := range []struct {
		name string
		ovr  shaper.Override
		want string
	}{
		{"rate", shaper.Override{Rate: 1}, ` rate=1/s` + "\n"},
		{"slow rate", shaper.Override{Rate: 0.5 / 60}, ` rate=30/h` + "\n"},
		{"all", shaper.Override{Rate: 20, Concurrency: 4, Capacity: 50}, ` rate=20/s concurrency=4 capacity=50` + "\n"},
		{"none", shaper.Override{}, ` override=none` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			sh := &fakeShaper{}
			if tc.ovr.IsZero() {
				sh.ovr = shaper.Override{Capacity: 3} // so clearing it is a change
			}
			c := New(sh, &memStore{kept: map[string]State{}}, func(string) bool { return true }, slog.New(slog.NewTextHandler(&logs, nil)))
			c.follow("a", State{Override: tc.ovr, By: "other"})
			line := logs.String()
			if !strings.Contains(line, `msg="runtime change kept in NATS KV applied here" downstream=a by=other paused=false paused_until=-`) ||
				!strings.HasSuffix(line, tc.want) {
				t.Errorf("log line:\n%s\nwant it to end with %q", line, tc.want)
			}
		})
	}
}
