package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/shaperd/shaper/config"
	"github.com/shaperd/shaper/shaper"
)

// What the admin API changes at runtime (pauses, timed or not, and
// overrides) goes through control. On a downstream with a durable queue
// the change is also kept in NATS KV (runtimekv.go), where every instance
// follows it and a restarted one finds it; on a memory downstream it
// belongs to this instance.

// shareTimeout bounds keeping one change in NATS KV.
const shareTimeout = 2 * time.Second

// runtimeState is a downstream's runtime changes, as kept in NATS KV.
type runtimeState struct {
	Paused   bool            `json:"paused,omitempty"`
	Until    *time.Time      `json:"until,omitempty"` // a timed pause's end
	Override shaper.Override `json:"override"`
	By       string          `json:"by,omitempty"` // who made the last change
}

// same reports whether s and o hold the same changes at now (a timed pause
// already over is no pause).
func (s runtimeState) same(o runtimeState, now time.Time) bool {
	a, b := s.pausedAt(now), o.pausedAt(now)
	return a == b && s.Override == o.Override &&
		(!a || (s.Until == nil) == (o.Until == nil) && (s.Until == nil || s.Until.Equal(*o.Until)))
}

func (s runtimeState) pausedAt(now time.Time) bool {
	return s.Paused && (s.Until == nil || s.Until.After(now))
}

// control is the admin API's Downstreams: the running shaper, with the
// changes of durable downstreams kept in kv. Safe for concurrent use.
type control struct {
	d  *Daemon
	sh *shaper.Shaper
	kv *kvRuntime // nil: nothing is shared
	// follows starts following kv, once; nil without kv. Only a config
	// with a durable downstream follows (and so creates) the bucket.
	follows func()

	mu   sync.Mutex              // serialises changes: each reads, then writes, a downstream's state
	seen map[string]runtimeState // the last state read from kv, by downstream
}

// Lanes returns the shaper's lanes.
func (c *control) Lanes() []shaper.LaneStatus { return c.sh.Lanes() }

// Pause pauses name until until (zero: until resumed).
func (c *control) Pause(name string, until time.Time, by string) error {
	return c.change(name, by, func(s *runtimeState) {
		s.Paused, s.Until = true, nil
		if !until.IsZero() {
			u := until.UTC()
			s.Until = &u
		}
	})
}

// Resume ends name's pause.
func (c *control) Resume(name, by string) error {
	return c.change(name, by, func(s *runtimeState) { s.Paused, s.Until = false, nil })
}

// SetOverride sets o's non-zero fields over name's override.
func (c *control) SetOverride(name string, o shaper.Override, by string) error {
	return c.change(name, by, func(s *runtimeState) {
		if o.Rate != 0 {
			s.Override.Rate = o.Rate
		}
		if o.Concurrency != 0 {
			s.Override.Concurrency = o.Concurrency
		}
		if o.Capacity != 0 {
			s.Override.Capacity = o.Capacity
		}
	})
}

// ClearOverride returns name to its configured values.
func (c *control) ClearOverride(name, by string) error {
	return c.change(name, by, func(s *runtimeState) { s.Override = shaper.Override{} })
}

// change applies edit to name's state here, then keeps it in kv for a
// durable downstream; when kv cannot take it the change is undone here and
// the error says so.
func (c *control) change(name, by string, edit func(*runtimeState)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.current(name)
	if !ok {
		return shaper.ErrUnknownDownstream
	}
	next := cur
	edit(&next)
	next.By = by
	if err := applyState(c.sh, name, next); err != nil {
		return err
	}
	if !c.shared(name) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), shareTimeout)
	defer cancel()
	if err := c.kv.put(ctx, name, next); err != nil {
		if uerr := applyState(c.sh, name, cur); uerr != nil {
			c.d.log.Error("undoing a change NATS KV refused failed", "downstream", name, "error", uerr.Error())
		}
		return fmt.Errorf("keep the change in NATS KV for every instance: %w; nothing changed", err)
	}
	c.seen[name] = next
	return nil
}

// current is name's state as the shaper holds it now.
func (c *control) current(name string) (runtimeState, bool) {
	for _, st := range c.sh.Lanes() {
		if st.Name != name || st.Removing {
			continue
		}
		s := runtimeState{Paused: st.Paused, Until: st.PausedUntil}
		if st.Override != nil {
			s.Override = *st.Override
		}
		return s, true
	}
	return runtimeState{}, false
}

// shared reports whether name's changes are kept in kv: it has a durable
// queue and there is a store.
func (c *control) shared(name string) bool {
	_, durable := c.d.durable.of(name)
	return c.kv != nil && durable
}

// follow applies a state read from kv (another instance's change, or one
// kept before a restart) when it differs from what name holds here.
func (c *control) follow(name string, s runtimeState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[name] = s
	c.followLocked(name, s)
}

// followLocked is follow without recording s. Requires c.mu.
func (c *control) followLocked(name string, s runtimeState) {
	if !c.shared(name) {
		return
	}
	cur, ok := c.current(name)
	if !ok || cur.same(s, time.Now()) {
		return
	}
	if err := applyState(c.sh, name, s); err != nil {
		c.d.log.Warn("a runtime change kept in NATS KV cannot apply here", "downstream", name, "by", s.By, "error", err.Error())
		return
	}
	until := "-"
	if s.Until != nil {
		until = s.Until.Format(time.RFC3339)
	}
	c.d.log.Info("runtime change kept in NATS KV applied here", "downstream", name, "by", s.By,
		"paused", s.pausedAt(time.Now()), "paused_until", until, "override", fmt.Sprintf("%+v", s.Override))
}

// reapply follows every state read from kv again, after a reload (a
// downstream may have come back).
func (c *control) reapply() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.follows != nil && slices.ContainsFunc(c.sh.Lanes(), func(st shaper.LaneStatus) bool { return c.shared(st.Name) }) {
		c.follows() // a durable downstream came with this reload
	}
	for name, s := range c.seen {
		c.followLocked(name, s)
	}
}

// applyState makes s name's override and pause in sh.
func applyState(sh *shaper.Shaper, name string, s runtimeState) error {
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

// errNoStore is kvRuntime's answer while its bucket is not reachable.
var errNoStore = errors.New("runtime bucket not ready")

// startControl makes the admin API's control over sh and, with a NATS
// connection and a durable downstream configured (at start or by a later
// reload), follows the runtime bucket: the states kept there (a pause or
// override made before a restart, or on another instance) apply before
// the shaper starts anything, waiting at most shareTimeout for them. A
// config of memory downstreams alone never touches the bucket. The
// returned stop ends the following.
func (d *Daemon) startControl(ctx context.Context, cfg config.Config, sh *shaper.Shaper) func() {
	c := &control{d: d, sh: sh, seen: map[string]runtimeState{}}
	d.ctl.Store(c)
	nc := d.nc.Load()
	if nc == nil {
		return func() {}
	}
	kv, err := newKVRuntime(nc, cfg.NATS.JetStream, d.log)
	if err != nil {
		d.log.Warn("runtime pauses and overrides stay with this instance", "error", err.Error())
		return func() {}
	}
	c.kv = kv
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	loaded := make(chan struct{})
	var wg sync.WaitGroup
	var once sync.Once
	c.follows = func() { once.Do(func() { wg.Go(func() { kv.watch(wctx, c.follow, loaded) }) }) }
	if slices.ContainsFunc(slices.Collect(maps.Values(cfg.Downstreams)), func(ds config.Downstream) bool {
		return ds.Queue.Backend == config.BackendJetStream
	}) {
		c.follows()
		select {
		case <-loaded:
		case <-time.After(shareTimeout):
			d.log.Warn("runtime pauses and overrides not read from NATS KV yet; they apply when read")
		}
	}
	return func() { cancel(); wg.Wait() }
}
