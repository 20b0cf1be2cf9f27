package jetstream

import (
	"context"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a queue's fetch or maintain goroutine, or
// anything else, outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startQueue starts q with ready as its Notify function.
func startQueue(q *Queue, ready func()) {
	q.Notify(ready)
	if err := q.Start(context.Background()); err != nil {
		panic(err) // Start does no I/O: it cannot fail
	}
}
