package jetstream

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/queue"
)

// A copy the stream's duplicate window refuses while the stream cannot
// be read for a while (its leader is being elected: here its message gets
// are refused for 1.5 s) is answered with the original's job id once it
// can be read again, never without one.
func TestDuplicateAnsweredAfterStreamUnreadable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	opts := natsserver.DefaultTestOptions
	opts.Port = port
	opts.JetStream = true
	opts.StoreDir = t.TempDir()
	user := func(deny ...string) []*server.User {
		return []*server.User{{Username: "u", Password: "p", Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: deny}}}}
	}
	opts.Users = user("$JS.API.STREAM.MSG.GET.SHAPER_printer")
	srv := natsserver.RunServer(&opts)
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("u", "p"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	st, err := New(nc, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	ls := QueueSettings{Name: "printer", Capacity: 10, Rate: 1}
	q := openQueue(t, st, ls)
	if _, err := store(q, &queue.Job{ID: "j1", DedupeID: "order-1", Payload: []byte("x"), Enqueued: time.Now()}); err != nil {
		t.Fatal(err)
	}
	readable := time.AfterFunc(1500*time.Millisecond, func() {
		re := opts
		re.Users = user()
		if err := srv.ReloadOptions(&re); err != nil {
			t.Errorf("reload: %v", err)
		}
	})
	defer readable.Stop()
	again := &queue.Job{ID: "j2", DedupeID: "order-1", Payload: []byte("x"), Enqueued: time.Now()}
	t0 := time.Now()
	if _, err := store(q, again); !errors.Is(err, queue.ErrDuplicate) || again.ID != "j1" {
		t.Fatalf("copy while the stream was unreadable: job id %q, %v; want j1, queue.ErrDuplicate", again.ID, err)
	}
	t.Logf("copy answered with the original's job id after %s", time.Since(t0).Round(time.Millisecond))
}
