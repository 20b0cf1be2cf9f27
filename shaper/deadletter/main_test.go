package deadletter

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a replayer, a worker, a refresher or
// anything else outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
