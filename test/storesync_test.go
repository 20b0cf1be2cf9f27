package test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// nats.embedded.sync: always starts the embedded server fsyncing every
// write, and the start-up log names the mode; without it the log names
// the server's 2 min default and what it risks.
func TestEmbeddedStoreSync(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ sync, want string }{
		{"sync: always,", `store_sync="always (every write is on disk before it is acknowledged)"`},
		{"sync: 50ms,", `store_sync="every 50ms"`},
		{"", `store_sync="every 2m (the server's default: a power failure can lose acknowledged writes of the last 2 minutes)"`},
	} {
		t.Run(c.want[:20], func(t *testing.T) {
			t.Parallel()
			ds := newDownstream(t)
			p := startShaperd(t, fmt.Sprintf(`
nats:
  embedded: { listen: %q, store_dir: %q, %s }
admin: { listen: "%%ADMIN%%" }
downstreams:
  printer:
    rate: 10/s
    queue: { capacity: 10 }
    sink: { http: { url: %q } }
`, freeAddr(t), t.TempDir(), c.sync, ds.URL))
			for deadline := time.Now().Add(5 * time.Second); !strings.Contains(p.stderr.String(), c.want); {
				if time.Now().After(deadline) { // the log is copied from the process's pipe
					t.Fatalf("no start-up line says %s:\n%s", c.want, p.stderr.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}
