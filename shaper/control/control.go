// Package control is the admin API's runtime changes of a downstream
// (pauses, timed or not, and overrides of its rate, concurrency and
// capacity) made to a running shaper, and shared between instances: on a
// downstream that is shared (the daemon: one with a durable queue) each
// change is also kept in a Store (the daemon: a NATS KV bucket), where
// every instance follows it and a restarted one finds it; on any other
// it belongs to this instance. The Store is the daemon's; this package
// knows it through Put and Watch only.
package control

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/shaperd/shaper/shaper"
)

// ShareTimeout bounds keeping one change in the Store, and how long Start
// waits for the states kept there.
const ShareTimeout = 2 * time.Second

// State is a downstream's runtime changes, as kept in the Store.
type State struct {
	Paused   bool            `json:"paused,omitempty"`
	Until    *time.Time      `json:"until,omitempty"` // a timed pause's end
	Override shaper.Override `json:"override"`
	By       string          `json:"by,omitempty"` // who made the last change
}

// same reports whether s and o hold the same changes at now (a timed pause
// already over is no pause).
func (s State) same(o State, now time.Time) bool {
	a, b := s.pausedAt(now), o.pausedAt(now)
	return a == b && s.Override == o.Override &&
		(!a || (s.Until == nil) == (o.Until == nil) && (s.Until == nil || s.Until.Equal(*o.Until)))
}

func (s State) pausedAt(now time.Time) bool {
	return s.Paused && (s.Until == nil || s.Until.After(now))
}

// Store keeps the states of shared downstreams where every instance
// follows them.
type Store interface {
	// Put keeps downstream's state.
	Put(ctx context.Context, downstream string, s State) error
	// Watch hands every state kept, then every change, to follow until ctx
	// is done; loaded is closed once the states kept before have been
	// handed over (or ctx ended).
	Watch(ctx context.Context, follow func(downstream string, s State), loaded chan<- struct{})
}

// Shaper is what Control changes (a *shaper.Shaper).
type Shaper interface {
	Lanes() []shaper.LaneStatus
	SetOverride(name string, o shaper.Override) error
	PauseUntil(name string, until time.Time) error
	Resume(name string) error
}

// Control is the admin API's Downstreams: the running shaper, with the
// changes of shared downstreams kept in the Store. Safe for concurrent use.
type Control struct {
	sh     Shaper
	store  Store             // nil: nothing is shared
	shared func(string) bool // whether a downstream's changes are kept in store
	log    *slog.Logger

	mu   sync.Mutex       // serialises changes: each reads, then writes, a downstream's state
	seen map[string]State // the last state read from the store, by downstream
	// follows starts following the store, once; nil before Start and
	// without a store. Only a shaper with a shared downstream follows (and
	// so touches) the store.
	follows func()
	cancel  context.CancelFunc // ends the follow; nil before Start
	wg      sync.WaitGroup     // the follow
}

// New returns the Control of sh; the changes of the downstreams shared
// reports are kept in store (nil: none are).
func New(sh Shaper, store Store, shared func(downstream string) bool, log *slog.Logger) *Control {
	return &Control{sh: sh, store: store, shared: shared, log: log, seen: map[string]State{}}
}

// Lanes returns the shaper's lanes.
func (c *Control) Lanes() []shaper.LaneStatus { return c.sh.Lanes() }

// Pause pauses name until until (zero: until resumed).
func (c *Control) Pause(name string, until time.Time, by string) error {
	return c.change(name, by, func(s *State) {
		s.Paused, s.Until = true, nil
		if !until.IsZero() {
			u := until.UTC()
			s.Until = &u
		}
	})
}

// Resume ends name's pause.
func (c *Control) Resume(name, by string) error {
	return c.change(name, by, func(s *State) { s.Paused, s.Until = false, nil })
}

// SetOverride sets o's non-zero fields over name's override.
func (c *Control) SetOverride(name string, o shaper.Override, by string) error {
	return c.change(name, by, func(s *State) {
		if o.Rate != 0 {
			s.Override.Rate = o.Rate
		}
		if o.Concurrency != 0 {
			s.Override.Concurrency = o.Concurrency
		}
		if o.Capacity != 0 {
			s.Override.Capacity = o.Capacity
		}
		if o.MaxJobs != 0 {
			s.Override.MaxJobs = o.MaxJobs
		}
	})
}

// ClearOverride returns name to its configured values.
func (c *Control) ClearOverride(name, by string) error {
	return c.change(name, by, func(s *State) { s.Override = shaper.Override{} })
}

// change applies edit to name's state here, then keeps it in the store for
// a shared downstream; when the store cannot take it the change is undone
// here and the error says so.
func (c *Control) change(name, by string, edit func(*State)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.current(name)
	if !ok {
		return shaper.ErrUnknownDownstream
	}
	next := cur
	edit(&next)
	next.By = by
	if err := apply(c.sh, name, next); err != nil {
		return err
	}
	if !c.isShared(name) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), ShareTimeout)
	defer cancel()
	if err := c.store.Put(ctx, name, next); err != nil {
		if uerr := apply(c.sh, name, cur); uerr != nil {
			c.log.Error("undoing a change NATS KV refused failed", "downstream", name, "error", uerr.Error())
		}
		return fmt.Errorf("keep the change in NATS KV for every instance: %w; nothing changed", err)
	}
	c.seen[name] = next
	return nil
}

// current is name's state as the shaper holds it now.
func (c *Control) current(name string) (State, bool) {
	for _, st := range c.sh.Lanes() {
		if st.Name != name || st.Removing {
			continue
		}
		s := State{Paused: st.Paused, Until: st.PausedUntil}
		if st.Override != nil {
			s.Override = *st.Override
		}
		return s, true
	}
	return State{}, false
}

// isShared reports whether name's changes are kept in the store: there is
// one and name is shared.
func (c *Control) isShared(name string) bool {
	return c.store != nil && c.shared(name)
}

// follow applies a state read from the store (another instance's change,
// or one kept before a restart) when it differs from what name holds here.
func (c *Control) follow(name string, s State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[name] = s
	c.followLocked(name, s)
}

// followLocked is follow without recording s. Requires c.mu.
func (c *Control) followLocked(name string, s State) {
	if !c.isShared(name) {
		return
	}
	cur, ok := c.current(name)
	if !ok || cur.same(s, time.Now()) {
		return
	}
	if err := apply(c.sh, name, s); err != nil {
		c.log.Warn("a runtime change kept in NATS KV cannot apply here", "downstream", name, "by", s.By, "error", err.Error())
		return
	}
	until := "-"
	if s.Until != nil {
		until = s.Until.Format(time.RFC3339)
	}
	attrs := []any{"downstream", name, "by", s.By, "paused", s.pausedAt(time.Now()), "paused_until", until}
	c.log.Info("runtime change kept in NATS KV applied here", append(attrs, overrideAttrs(s.Override)...)...)
}

// overrideAttrs returns o's set fields as log attrs (rate=1/s
// concurrency=4 capacity=50), or override=none.
func overrideAttrs(o shaper.Override) []any {
	if o.IsZero() {
		return []any{"override", "none"}
	}
	var attrs []any
	if o.Rate != 0 {
		attrs = append(attrs, "rate", formatRate(o.Rate))
	}
	if o.Concurrency != 0 {
		attrs = append(attrs, "concurrency", o.Concurrency)
	}
	if o.Capacity != 0 {
		attrs = append(attrs, "capacity", o.Capacity)
	}
	if o.MaxJobs != 0 {
		attrs = append(attrs, "max_jobs", o.MaxJobs)
	}
	return attrs
}

// formatRate writes a per-second rate as the config does, with the largest
// unit that keeps the number at least 1: 2/s, 30/m, 1/h.
func formatRate(perSec float64) string {
	n, unit := perSec, "/s"
	switch {
	case perSec >= 1 || perSec <= 0:
	case perSec*60 >= 1:
		n, unit = perSec*60, "/m"
	default:
		n, unit = perSec*3600, "/h"
	}
	return strconv.FormatFloat(math.Round(n*1000)/1000, 'f', -1, 64) + unit
}

// Reapply follows every state read from the store again, after a reload
// (a downstream may have come back), and starts following the store if
// the reload brought the first shared downstream.
func (c *Control) Reapply() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.follows != nil && slices.ContainsFunc(c.sh.Lanes(), func(st shaper.LaneStatus) bool { return c.isShared(st.Name) }) {
		c.follows() // a shared downstream came with this reload
	}
	for name, s := range c.seen {
		c.followLocked(name, s)
	}
}

// Start prepares following the store until Stop: the states kept there
// (a pause or override made before a restart, or on another instance)
// apply. When one of the shaper's downstreams is shared it follows at
// once and returns once they have applied, waiting at most ShareTimeout;
// otherwise it follows only once Reapply finds a shared downstream.
// Without a store it does nothing.
func (c *Control) Start(ctx context.Context) error {
	if c.store == nil {
		return nil
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	loaded := make(chan struct{})
	var once sync.Once
	follows := func() { once.Do(func() { c.wg.Go(func() { c.store.Watch(wctx, c.follow, loaded) }) }) }
	c.mu.Lock()
	c.follows, c.cancel = follows, cancel
	c.mu.Unlock()
	if slices.ContainsFunc(c.sh.Lanes(), func(st shaper.LaneStatus) bool { return c.shared(st.Name) }) {
		follows()
		select {
		case <-loaded:
		case <-time.After(ShareTimeout):
			c.log.Warn("runtime pauses and overrides not read from NATS KV yet; they apply when read")
		}
	}
	return nil
}

// Stop stops following the store and waits. Idempotent.
func (c *Control) Stop() error {
	c.mu.Lock()
	cancel := c.cancel
	c.follows = func() {} // no follow starts after Stop
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	c.wg.Wait()
	return nil
}

// apply makes s name's override and pause in sh.
func apply(sh Shaper, name string, s State) error {
	if err := sh.SetOverride(name, s.Override); err != nil {
		return err
	}
	switch {
	case !s.Paused:
		return sh.Resume(name)
	case s.Until == nil:
		return sh.PauseUntil(name, time.Time{})
	}
	return sh.PauseUntil(name, *s.Until)
}
