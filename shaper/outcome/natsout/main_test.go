package natsout

import (
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

// TestMain fails the package if a look-up, a timer's answer or anything
// else outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runNATS starts a NATS server with JetStream in t's temp dir and
// connects to it.
func runNATS(t testing.TB) (*nats.Conn, natsjs.JetStream) {
	t.Helper()
	opts := natsserver.DefaultTestOptions
	opts.Port = -1
	opts.JetStream = true
	opts.StoreDir = t.TempDir()
	srv := natsserver.RunServer(&opts)
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}
