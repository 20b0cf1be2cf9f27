package test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// A daemon restarted right after a stop finds the embedded server's port
// still held by the old process while it finishes its shutdown grace. It
// waits for the port instead of exiting: here the port is held for 11 s
// (longer than the 10 s the start-up used to allow), then released.
func TestEmbeddedStartWaitsForPort(t *testing.T) {
	t.Parallel()
	natsAddr := freeAddr(t)
	held, err := net.Listen("tcp", natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	released := time.AfterFunc(11*time.Second, func() { held.Close() })
	defer released.Stop()
	defer held.Close()
	ds := newDownstream(t)
	yaml := fmt.Sprintf(`
nats:
  embedded: { listen: %q, store_dir: %q }
admin: { listen: "%%ADMIN%%" }
downstreams:
  printer:
    rate: 10/s
    queue: { capacity: 10 }
    sink: { http: { url: %q } }
`, natsAddr, t.TempDir(), ds.URL)
	start := time.Now()
	p := startShaperd(t, yaml)
	if took := time.Since(start); took < 11*time.Second {
		t.Fatalf("ready after %s while the port was held for 11s", took)
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(p.stderr.String(), "waiting for its port"); {
		if time.Now().After(deadline) { // the log is copied from the process's pipe
			t.Fatalf("no log line says it waits for the port:\n%s", p.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
