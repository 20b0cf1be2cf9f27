package config

import (
	"fmt"
	"strings"
	"time"
)

// SyncAlways is nats.embedded.sync's value for an fsync of every write.
const SyncAlways = "always"

// Bounds of nats.embedded.sync as a duration, and the server's own.
const (
	defaultSync     = 2 * time.Minute
	MinSyncInterval = time.Millisecond
	MaxSyncInterval = time.Hour
)

// StoreSync is how the embedded server's JetStream store reaches the
// disk (nats.embedded.sync): Always fsyncs every write before it is
// acknowledged; else every Interval (0: the server's own, 2m).
type StoreSync struct {
	Always   bool
	Interval time.Duration
}

// ParseSync reads nats.embedded.sync: "" (the server's default), "always"
// or a duration (1ms..1h).
func ParseSync(s string) (StoreSync, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return StoreSync{}, nil
	case strings.EqualFold(s, SyncAlways):
		return StoreSync{Always: true}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < MinSyncInterval || d > MaxSyncInterval {
		return StoreSync{}, fmt.Errorf("%q is not a sync mode; write always (fsync every write: accepted means on disk) or an interval %s..%s (e.g. 1s); leave it out for the server's 2m",
			s, FormatDuration(MinSyncInterval), FormatDuration(MaxSyncInterval))
	}
	return StoreSync{Interval: d}, nil
}

// String names the mode as the start-up log says it.
func (s StoreSync) String() string {
	switch {
	case s.Always:
		return "always (every write is on disk before it is acknowledged)"
	case s.Interval > 0 && s.Interval != defaultSync:
		return "every " + FormatDuration(s.Interval)
	}
	return "every 2m (the server's default: a power failure can lose acknowledged writes of the last 2 minutes)"
}

// validateSync checks nats.embedded.sync: a mode ParseSync reads, and only
// for the embedded server.
func (c Config) validateSync(v validator) {
	n := c.NATS
	if k := "nats.embedded.sync"; v.ok(k) && n.Embedded.Sync != "" {
		if _, err := ParseSync(n.Embedded.Sync); err != nil {
			v.add(k, "%s", err.Error())
		} else if n.URL != "" {
			v.add(k, "is the embedded server's; with nats.url set, set sync_interval (e.g. always) in the remote server's jetstream block (docs/guarantees.md)")
		}
	}
}
