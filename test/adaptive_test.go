package test

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// adaptiveTable runs every shape longer, adaptive and fixed, asserts the
// adaptive rate's targets (from 2 s after the start: ≥ 90 % of the real
// capacity, ≤ 5 % of tries refused, no job lost) and prints
// BENCHMARKS.md's table.
var adaptiveTable = flag.Bool("shaper.adaptive", false,
	"run TestAdaptiveShapeTable: every shape, adaptive and fixed, strict figures and the table")

// shapeLane is the downstream block every shape runs behind: a 100/s
// ceiling, 8 in flight, retries that outlast any refusal run.
func shapeLane(url string, adaptive bool) string {
	control := "fixed"
	if adaptive {
		control = "adaptive"
	}
	return lane("api", "100/s", 100000, fmt.Sprintf(
		"    rate_control: %s\n    concurrency: 8\n    retry: { max_attempts: 100, initial_backoff: 100ms, max_backoff: 1s }\n",
		control), url)
}

// shapeResult is one run's figures over the measured span.
type shapeResult struct {
	achieved float64       // successes ÷ capacity
	refused  float64       // refused ÷ tries
	settle   time.Duration // see settleTime; -1 = never
	lost     int           // published jobs never delivered
	tries    int
}

func (r shapeResult) String() string {
	return fmt.Sprintf("achieved %.1f %% of capacity, %.1f %% of %d tries refused, settled %s, %d lost",
		100*r.achieved, 100*r.refused, r.tries, settleCell(r.settle), r.lost)
}

// runShape publishes sh.offer jobs/s on nc for sh.run, then waits until
// every job was delivered (at most drain). The figures are over whole
// windows (sh.align) from 2 s to the run's end.
func runShape(t *testing.T, sh limitShape, d *shapeDS, nc *nats.Conn, drain time.Duration) shapeResult {
	t.Helper()
	prefix := "job-"
	t0 := time.Now()
	published, owed := 0, 0.0
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for time.Since(t0) < sh.run {
		<-tick.C
		for owed += sh.offer * 0.05; owed >= 1; owed-- {
			if err := nc.Publish("shaper.jobs.api", []byte(prefix+strconv.Itoa(published))); err != nil {
				t.Fatal(err)
			}
			published++
		}
	}
	end := time.Now()
	deadline := end.Add(drain)
	for d.missing(prefix, published) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	from, to := t0.Add(2*time.Second), end
	if sh.align > 0 {
		from, to = from.Add(sh.align-1).Truncate(sh.align), to.Truncate(sh.align)
	}
	ok, refused, capacity := d.between(from, to)
	return shapeResult{
		achieved: float64(ok) / capacity,
		refused:  float64(refused) / math.Max(1, float64(ok+refused)),
		settle:   settleTime(d, t0, end, max(sh.align, time.Second)),
		lost:     d.missing(prefix, published),
		tries:    ok + refused,
	}
}

// settleTime is, over the phases of constant capacity, the longest time
// from a phase's start (the run's start for the first) until every later
// bin of the phase (bins of width w, whole ones) delivered at least 85 %
// of its capacity with at most 10 % of its tries refused; -1 if some
// phase never settled.
func settleTime(d *shapeDS, t0, end time.Time, w time.Duration) time.Duration {
	worst, start, since := time.Duration(0), t0, time.Time{}
	prev := -1.0
	for b := t0.Add(w - 1).Truncate(w); !b.Add(w).After(end); b = b.Add(w) {
		if d.capacityAt(b) != d.capacityAt(b.Add(w-time.Millisecond)) {
			continue // the capacity changes inside this bin
		}
		ok, refused, capacity := d.between(b, b.Add(w))
		c := capacity / w.Seconds()
		if prev >= 0 && math.Abs(c-prev) > 0.01*prev {
			if since.IsZero() {
				return -1
			}
			worst, start, since = max(worst, since.Sub(start)), b, time.Time{}
		}
		prev = c
		switch good := float64(ok) >= 0.85*capacity && float64(refused) <= 0.1*float64(ok+refused); {
		case !good:
			since = time.Time{}
		case since.IsZero():
			since = b
		}
	}
	if since.IsZero() {
		return -1
	}
	return max(worst, since.Sub(start))
}

// runShapeInProcess runs sh against the daemon in this process.
func runShapeInProcess(t *testing.T, sh limitShape, adaptive bool) shapeResult {
	srv := runNATS(t)
	d := sh.build(t, sh.run)
	in := startDaemon(t, srv, baseConfig(shapeLane(d.URL, adaptive)))
	return runShape(t, sh, d, in.nc, time.Minute)
}

// adaptiveShapes runs every shape end to end (real NATS, the daemon,
// a real HTTP downstream) under rate_control adaptive, all at once (they
// mostly wait: ~35 s in all): each in this process, and two of them (the
// sliding log; X-RateLimit-*) against the built shaperd too. The bounds
// are loose for a busy 2-core machine; the strict figures are
// TestAdaptiveShapeTable's. Part of TestRates.
func adaptiveShapes(t *testing.T) {
	if testing.Short() {
		t.Skip("the shapes take ~35 s; run without -short")
	}
	var wg sync.WaitGroup
	for _, sh := range shapes {
		wg.Go(func() { // t.Run from several goroutines: not bounded by -parallel
			t.Run(sh.name, func(t *testing.T) {
				r := runShapeInProcess(t, sh, true)
				t.Logf("%s: %v", sh.name, r)
				if r.achieved < 0.75 || r.refused > 0.15 || r.lost > 0 {
					t.Errorf("%s: %v; want >= 75 %% of capacity, <= 15 %% refused, none lost", sh.name, r)
				}
			})
		})
	}
	for _, i := range []int{2, 5} { // the sliding log; X-RateLimit-*
		sh := shapes[i]
		wg.Go(func() {
			t.Run("binary/"+sh.name, func(t *testing.T) {
				r := runShapeBinary(t, sh)
				t.Logf("binary, %s: %v", sh.name, r)
				if r.achieved < 0.75 || r.refused > 0.15 || r.lost > 0 {
					t.Errorf("%s: %v; want >= 75 %% of capacity, <= 15 %% refused, none lost", sh.name, r)
				}
			})
		})
	}
	wg.Wait()
}

// runShapeBinary runs sh against the built shaperd.
func runShapeBinary(t *testing.T, sh limitShape) shapeResult {
	srv := runNATS(t)
	d := sh.build(t, sh.run)
	conf := fmt.Sprintf("nats: { url: %q }\nadmin: { listen: \"%%ADMIN%%\" }\nshutdown_grace: 2s\ndownstreams:%s",
		srv.ClientURL(), shapeLane(d.URL, true))
	startShaperd(t, conf)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	return runShape(t, sh, d, nc, time.Minute)
}

// TestAdaptiveShapeTable is BENCHMARKS.md's table: every shape for twice
// its run, adaptive then fixed, one at a time, with the adaptive targets
// (docs/policies.md) asserted for adaptive. Behind -shaper.adaptive (about 10 minutes).
func TestAdaptiveShapeTable(t *testing.T) {
	if !*adaptiveTable {
		t.Skip("run with -shaper.adaptive (about 10 minutes)")
	}
	var rows []string
	for _, sh := range shapes {
		sh.run *= 2
		a := runShapeInProcess(t, sh, true)
		f := runShapeInProcess(t, sh, false)
		row := fmt.Sprintf("| %s | %.1f %% | %.2f %% | %s | %.1f %% | %.2f %% | %s | %d / %d |", sh.name,
			100*a.achieved, 100*a.refused, settleCell(a.settle), 100*f.achieved, 100*f.refused, settleCell(f.settle), a.lost, f.lost)
		t.Log(row)
		rows = append(rows, row)
		if a.achieved < 0.9 || a.refused > 0.05 || a.lost > 0 {
			t.Errorf("%s: %v; want >= 90 %% of capacity, <= 5 %% refused, none lost", sh.name, a)
		}
	}
	t.Logf("\n| shape | adaptive: achieved/capacity | refused | settle | fixed: achieved/capacity | refused | settle | lost (adaptive / fixed) |\n"+
		"|---|---:|---:|---:|---:|---:|---:|---:|\n%s", strings.Join(rows, "\n"))
}

func settleCell(d time.Duration) string {
	if d < 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}
