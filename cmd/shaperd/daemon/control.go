package daemon

import (
	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/config"
	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/control"
)

// What the admin API changes at runtime (pauses, timed or not, and
// overrides) goes through a control.Control. On a downstream with a
// durable queue the change is also kept in NATS KV (runtimekv.go, its
// store), where every instance follows it and a restarted one finds it;
// on a memory downstream it belongs to this instance.

// newControl makes the admin API's control over sh. Started, with a NATS
// connection and a durable downstream configured (at start or by a later
// reload), it follows the runtime bucket: the states kept there (a pause
// or override made before a restart, or on another instance) apply before
// the shaper starts anything, waiting at most control.ShareTimeout for
// them. A config of memory downstreams alone never touches the bucket.
func (d *Daemon) newControl(cfg config.Config, nc *nats.Conn, sh *shaper.Shaper) *control.Control {
	durable := func(name string) bool {
		_, ok := d.durable.of(name)
		return ok
	}
	var store control.Store // nil: nothing is shared
	if nc != nil {
		kv, err := newKVRuntime(nc, cfg.NATS.JetStream, d.log)
		if err != nil {
			d.log.Warn("runtime pauses and overrides stay with this instance", "error", err.Error())
		} else {
			store = kv
		}
	}
	return control.New(sh, store, durable, d.log)
}
