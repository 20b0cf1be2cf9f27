package test

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind (daemons, NATS
// servers, proxies and downstreams are all stopped by their cleanups), and
// removes the shaperd binary built for the process tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			println("goleak: goroutines left behind after the tests:\n", err.Error())
			code = 1
		}
	}
	os.Exit(code)
}
