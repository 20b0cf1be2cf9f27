package jetstream

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/queue"
)

// A record answers within its job's window, counted from the job's
// acceptance, and is forgotten after it; a miss is an answer only once the
// table caught up.
func TestRecordTableWindow(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	tb := newRecordTable(time.Minute, 10)
	if _, _, sure := tb.get(t0, "a"); sure {
		t.Fatal("a table that has not caught up answered a miss")
	}
	tb.put(t0, 1, "a", "j1", t0.Add(-10*time.Second), 1)
	tb.put(t0, 2, "old", "j0", t0.Add(-time.Minute), 0) // accepted a window ago
	if id, found, sure := tb.get(t0, "a"); !found || !sure || id != "j1" {
		t.Fatalf("a: %q %v %v, want j1 found", id, found, sure)
	}
	if _, found, sure := tb.get(t0, "old"); found || !sure {
		t.Fatalf("a record older than the window: found %v sure %v, want a sure miss", found, sure)
	}
	if _, found, _ := tb.get(t0.Add(50*time.Second), "a"); found {
		t.Fatal("a record answered after its job's window")
	}
	tb.expire(t0.Add(time.Minute))
	if n := tb.size(); n != 0 {
		t.Fatalf("%d records held after their window, want 0", n)
	}
}

// Past the bound the oldest records are dropped, and until their window
// would have ended a miss is no answer (the caller asks the stream).
func TestRecordTableBound(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	tb := newRecordTable(time.Minute, 2)
	tb.put(t0, 1, "a", "j1", t0, 0)
	tb.put(t0.Add(time.Second), 2, "b", "j2", t0.Add(time.Second), 0)
	tb.put(t0.Add(2*time.Second), 3, "c", "j3", t0.Add(2*time.Second), 0)
	if n := tb.size(); n != 2 {
		t.Fatalf("%d records held, want the bound 2", n)
	}
	if _, found, sure := tb.get(t0.Add(3*time.Second), "a"); found || sure {
		t.Fatalf("a dropped record: found %v sure %v, want an unsure miss", found, sure)
	}
	if id, found, _ := tb.get(t0.Add(3*time.Second), "c"); !found || id != "j3" {
		t.Fatalf("c: %q %v, want j3", id, found)
	}
	if _, _, sure := tb.get(t0.Add(time.Minute), "a"); !sure {
		t.Fatal("a miss is still unsure after the dropped record's window ended")
	}
}

// A Store that starts after records were written loads them before Ensure
// returns and answers a copy from memory; records written by another
// Store's drain arrive through the watch.
func TestRecordsLoadedAndWatched(t *testing.T) {
	t.Parallel()
	st, _ := runStore(t)
	ctx := context.Background()
	ls := QueueSettings{Name: "printer", Capacity: 10, Rate: 100}
	if err := st.Ensure(ctx, []QueueSettings{ls}); err != nil {
		t.Fatal(err)
	}
	enq := time.Now()
	// Stored (its PubAck) before the late Store starts: a plain publish
	// could still be on its way into the stream when the late Store reads
	// the stream's state, which it would then take as caught up.
	if _, err := st.js.PublishMsg(ctx, st.recordMsg("order-1", "j1", enq)); err != nil {
		t.Fatal(err)
	}

	late, err := New(st.nc, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if err := late.Ensure(ctx, []QueueSettings{ls}); err != nil {
		t.Fatal(err)
	}
	if id, found, sure := late.table.get(time.Now(), "order-1"); !found || !sure || id != "j1" {
		t.Fatalf("after Ensure: %q found %v sure %v, want j1 from memory", id, found, sure)
	}
	q, _ := late.Queue(ls)
	again := &queue.Job{ID: "j2", DedupeID: "order-1", Enqueued: time.Now()}
	if _, err := store(q, again); !errors.Is(err, queue.ErrDuplicate) || again.ID != "j1" {
		t.Fatalf("copy: job id %q, %v; want j1, queue.ErrDuplicate", again.ID, err)
	}

	if err := st.nc.PublishMsg(st.recordMsg("order-2", "j3", time.Now())); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if id, found, _ := late.table.get(time.Now(), "order-2"); found && id == "j3" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a record written after the start did not reach the table")
		}
	}
}

// After the NATS server restarts, the table is behind until its watch
// caught up again (a miss meanwhile is no answer), and records written
// after the restart reach it.
func TestRecordsAfterServerRestart(t *testing.T) {
	t.Parallel()
	opts := natsserver.DefaultTestOptions
	opts.Port = -1
	opts.JetStream = true
	opts.StoreDir = t.TempDir()
	srv := natsserver.RunServer(&opts)
	opts.Port = srv.Addr().(*net.TCPAddr).Port //nolint:forcetypeassert // a TCP listener
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	st, err := New(nc, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := st.Ensure(ctx, nil); err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	srv = natsserver.RunServer(&opts)
	t.Cleanup(srv.Shutdown)
	for deadline := time.Now().Add(5 * time.Second); !nc.IsConnected() || st.recordsReady() == nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("connected %v, records ready %v: want reconnected and behind", nc.IsConnected(), st.recordsReady())
		}
	}
	if err := nc.PublishMsg(st.recordMsg("order-1", "j1", time.Now())); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if id, found, sure := st.table.get(time.Now(), "order-1"); found && sure && id == "j1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a record written after the restart did not reach the table (ready: %v)", st.recordsReady())
		}
	}
}
