package admin

import (
	"testing"

	"go.uber.org/goleak"
)

// The tests of this package start no NATS server (the whole daemon is
// tested in test/), so any goroutine left behind is the daemon's own leak:
// the history sampler, the admin server, a lane.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
