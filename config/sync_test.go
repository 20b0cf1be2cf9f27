package config

import (
	"strings"
	"testing"
	"time"
)

func TestParseSync(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want StoreSync
		ok   bool
	}{
		{"", StoreSync{}, true},
		{"always", StoreSync{Always: true}, true},
		{"ALWAYS", StoreSync{Always: true}, true},
		{"1s", StoreSync{Interval: time.Second}, true},
		{"1h", StoreSync{Interval: time.Hour}, true},
		{"2h", StoreSync{}, false},
		{"0s", StoreSync{}, false},
		{"never", StoreSync{}, false},
	} {
		got, err := ParseSync(c.in)
		if got != c.want || (err == nil) != c.ok {
			t.Errorf("ParseSync(%q) = %+v, %v", c.in, got, err)
		}
		if err != nil && !strings.Contains(err.Error(), "write always") {
			t.Errorf("ParseSync(%q): %v does not say what is valid", c.in, err)
		}
	}
}

// sync is the embedded server's: with a remote server it is refused,
// saying where to set it instead.
func TestSyncWithARemoteServer(t *testing.T) {
	t.Parallel()
	c := Defaults()
	c.NATS.URL = "nats://10.0.0.5:4222"
	c.NATS.Embedded.Sync = "always"
	c.Downstreams = map[string]Downstream{}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "nats.embedded.sync: is the embedded server's; with nats.url set, set sync_interval") {
		t.Fatalf("Validate: %v", err)
	}
}
