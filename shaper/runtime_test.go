package shaper

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shaperd/shaper/shaper/policy"
)

// TestTimedPause: a timed pause holds starts, not intake, for exactly its
// length, shows its end, and ends by itself with no burst: the schedule
// restarts from the end.
func TestTimedPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecSink(nil)
		h := start(t, Settings{Lanes: []LaneSettings{laneCfg("a", 10, 100)}}, map[string]Sink{"a": sink})
		defer h.stop()
		h.submit("a", 2)
		time.Sleep(150 * time.Millisecond)
		until := time.Now().Add(3 * time.Second)
		if err := h.sh.PauseUntil("a", until); err != nil {
			t.Fatal(err)
		}
		h.submit("a", 3)
		time.Sleep(time.Second)
		st := h.status("a")
		if !st.Paused || st.PausedUntil == nil || !st.PausedUntil.Equal(until) || st.EffectiveRate != 0 || st.Depth != 3 {
			t.Errorf("status while paused: %+v", st)
		}
		if p := testutil.ToFloat64(h.met.Paused.WithLabelValues("a")); p != 1 {
			t.Errorf("shaper_downstream_paused = %v, want 1", p)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		wantStarts(t, sink.starts(), 0, 0.1, 3.15, 3.25, 3.35)
		if st := h.status("a"); st.Paused || st.PausedUntil != nil {
			t.Errorf("status after the pause: %+v", st)
		}
		if err := h.sh.PauseUntil("nope", until); !errors.Is(err, ErrUnknownDownstream) {
			t.Errorf("PauseUntil(unknown) = %v", err)
		}
	})
}

// TestOverride: an override applies at once to queued jobs, stays over a
// reload, and a zero one returns to the configured values.
func TestOverride(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecSink(nil)
		set := Settings{Lanes: []LaneSettings{laneCfg("a", 2, 100)}}
		h := start(t, set, map[string]Sink{"a": sink})
		defer h.stop()
		h.submit("a", 10)
		time.Sleep(1250 * time.Millisecond) // starts at 0, 0.5, 1
		if err := h.sh.SetOverride("a", Override{Rate: 10, Capacity: 50}); err != nil {
			t.Fatal(err)
		}
		st := h.status("a")
		if st.Rate != 10 || st.Capacity != 50 || st.Override == nil || *st.Override != (Override{Rate: 10, Capacity: 50}) {
			t.Errorf("status with override: %+v", st)
		}
		if err := h.sh.Apply(set); err != nil { // a reload keeps it
			t.Fatal(err)
		}
		if st := h.status("a"); st.Rate != 10 || st.Override == nil {
			t.Errorf("status after a reload: %+v", st)
		}
		time.Sleep(2 * time.Second)
		if err := h.sh.SetOverride("a", Override{}); err != nil {
			t.Fatal(err)
		}
		if st := h.status("a"); st.Rate != 2 || st.Capacity != 100 || st.Override != nil {
			t.Errorf("status after the override is gone: %+v", st)
		}
		synctest.Wait()
		// The new interval counts from the last start (1 s); that slot has
		// passed, so the first start is at once, within the catch-up margin.
		wantStarts(t, sink.starts(), 0, 0.5, 1, 1.25, 1.33, 1.43, 1.53, 1.63, 1.73, 1.83)
		if err := h.sh.SetOverride("a", Override{Rate: -1}); !errors.Is(err, ErrInvalidOverride) {
			t.Errorf("SetOverride(rate -1) = %v", err)
		}
		if err := h.sh.SetOverride("nope", Override{Rate: 1}); !errors.Is(err, ErrUnknownDownstream) {
			t.Errorf("SetOverride(unknown) = %v", err)
		}
	})
}

// TestMaintenanceWindow: no start inside a window, intake goes on, the
// schedule restarts from its end, shaper_maintenance follows it, and a
// receipt's eta counts a window that is due.
func TestMaintenanceWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now().UTC() // synctest's clock: midnight
		ls := laneCfg("a", 2, 100)
		var every [7]bool
		for i := range every {
			every[i] = true
		}
		// From 2 s after now, for 3 s, every day.
		ls.Maintenance = []policy.Window{{Days: every, Hour: now.Hour(), Minute: now.Minute(), Second: now.Second() + 2, Length: 3 * time.Second}}
		sink := newRecSink(nil)
		h := start(t, Settings{Lanes: []LaneSettings{ls}}, map[string]Sink{"a": sink})
		defer h.stop()
		rcs := h.submit("a", 6)
		// Starts at 0, 0.5, 1, 1.5; the window holds 2..5; then 5, 5.5.
		if eta := rcs[5].ETA; eta != 5500*time.Millisecond {
			t.Errorf("eta of the 6th job = %v, want 5.5s (the window counted)", eta)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		st := h.status("a")
		if st.Maintenance == nil || !st.Maintenance.Active || !st.Maintenance.End.Equal(now.Add(5*time.Second)) || st.EffectiveRate != 0 {
			t.Errorf("status in the window: %+v", st.Maintenance)
		}
		if m := testutil.ToFloat64(h.met.Maintenance.WithLabelValues("a")); m != 1 {
			t.Errorf("shaper_maintenance in the window = %v, want 1", m)
		}
		if rc := h.submit("a", 1)[0]; !rc.Accepted {
			t.Errorf("intake in the window: %+v", rc)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		wantStarts(t, sink.starts(), 0, 0.5, 1, 1.5, 5, 5.5, 6)
		if m := testutil.ToFloat64(h.met.Maintenance.WithLabelValues("a")); m != 0 {
			t.Errorf("shaper_maintenance after the window = %v, want 0", m)
		}
		if st := h.status("a"); st.Maintenance == nil || st.Maintenance.Active || !st.Maintenance.Start.Equal(now.Add(24*time.Hour+2*time.Second)) {
			t.Errorf("next window: %+v", st.Maintenance)
		}
	})
}
