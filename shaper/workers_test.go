package shaper

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/pool"
)

// TestWorkersReusedAndRetired: tries one after another run on one
// worker; a sink that blocks makes the next tries start workers of their
// own (a blocked try holds up no other); once the peak is over, each start
// retires one worker idle for pool.Idle, down to the one in use.
func TestWorkersReusedAndRetired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var block atomic.Bool
		block.Store(true)
		sink := newRecSink(func(ctx context.Context, _ *queue.Job) error {
			if block.Load() {
				<-release
			}
			return nil
		})
		cfg := laneCfg("a", 10, 100)
		cfg.Concurrency = 3
		h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"a": sink})
		defer h.stop()
		ws := h.sh.deliveries

		h.submit("a", 3) // at 0, 100 and 200 ms, all blocked
		time.Sleep(time.Second)
		if got := sink.peak(); got != 3 {
			t.Fatalf("%d tries in flight, want 3 (a blocked try holds up the others)", got)
		}
		if got := ws.Idle(); got != 0 {
			t.Fatalf("%d idle workers while 3 tries block, want 0", got)
		}
		block.Store(false)
		close(release)
		synctest.Wait()
		if got := ws.Idle(); got != 3 {
			t.Fatalf("%d idle workers after the peak, want 3", got)
		}

		h.submit("a", 5) // one at a time, 100 ms apart: one worker does
		time.Sleep(time.Second)
		if got := ws.Idle(); got != 3 {
			t.Fatalf("%d idle workers, want still 3 (none idle %v yet)", got, pool.Idle)
		}

		time.Sleep(pool.Idle)
		h.submit("a", 3)
		time.Sleep(time.Second)
		if got := ws.Idle(); got != 1 {
			t.Fatalf("%d idle workers, want 1 (two retired, idle for %v)", got, pool.Idle)
		}
		if got := len(sink.all()); got != 11 {
			t.Fatalf("%d tries, want 11", got)
		}
	})
}
