package jetstream

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a queue's fetch or maintain goroutine, or
// anything else, outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
