package jetstream

import (
	"context"
	"flag"
	"runtime"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the tests, each on a NATS server of its own, 4 at once at
// least unless -test.parallel says otherwise (they mostly wait on ack
// waits, pins and fetches), and fails the package if a queue's fetch or
// maintain goroutine, or anything else, outlives them.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(max(4, runtime.GOMAXPROCS(0))))
	}
	goleak.VerifyTestMain(m)
}

// startQueue starts q with ready as its Notify function.
func startQueue(q *Queue, ready func()) {
	q.Notify(ready)
	if err := q.Start(context.Background()); err != nil {
		panic(err) // Start does no I/O: it cannot fail
	}
}
