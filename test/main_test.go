package test

import (
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// minParallel is how many tests marked t.Parallel run at once at least,
// unless -test.parallel says otherwise (its default is GOMAXPROCS). The
// black-box tests mostly wait (on paced deliveries, timeouts, restarts),
// so more of them than the machine's cores share it well. Under the race
// detector each takes several times the CPU, so fewer share it.
var minParallel = map[bool]int{false: 8, true: 4}[raceEnabled]

// TestMain runs the tests with at least minParallel in parallel, starts building the
// shaperd binary for the process tests at once, checks that no test leaves
// a goroutine behind (daemons, NATS servers, proxies and downstreams are
// all stopped by their cleanups), and removes the binary.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(max(minParallel, runtime.GOMAXPROCS(0))))
	}
	var build sync.WaitGroup
	if !testing.Short() {
		build.Go(func() { buildOnce.Do(buildShaperd) })
	}
	code := m.Run()
	build.Wait()
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
