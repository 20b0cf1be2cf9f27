package test

import (
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// steady runs TestSteadyLoadNoGrowth for this long; 0 skips it:
//
//	go test ./test -run '^TestSteadyLoadNoGrowth$' -shaper.steady 30m -timeout 45m -count=1 -v
var steady = flag.Duration("shaper.steady", 0, "run the steady-load soak test for this long (0: skip it)")

// steadyLanes are the soak's downstreams (name → queue backend): one per
// backend, each offered perLaneRate jobs/s and drained at a quarter more, so
// that the queues stay shallow and every job is delivered soon after it is
// offered.
var steadyLanes = []struct{ name, backend string }{{"mem", "memory"}, {"js", "jetstream"}}

// The series whose growth the soak bounds.
var steadySeries = []string{"process_resident_memory_bytes", "go_memstats_heap_inuse_bytes",
	"go_goroutines", "process_open_fds"}

// steadyMaxGrowth bounds each series' growth over the run after warm-up.
const steadyMaxGrowth = 0.10

// steadyByteSlack is growth of a memory series within noise whatever its
// share: the heap (11 MiB with the job records a memory downstream keeps)
// moves by more than 1 MiB from one GC cycle to the next in a 2-minute
// run (CI saw fifths of 11.1, 11.9, 11.1, 11.3 and 12.5 MiB), while a
// leak of even 16 bytes a job at 2 000 jobs/s adds 2 MiB between the
// first fifth and the last of that run.
const steadyByteSlack = 2 << 20

// A steady load through one shaperd process (so that its process_* and go_*
// series are its own) leaves its memory, goroutines and file descriptors
// flat: 2 000 jobs/s offered and drained, half through a memory queue, half
// through a jetstream one, each to an HTTP downstream answering 200.
//
// /metrics is sampled every 1 to 5 s. The first 20 % of the run (at least
// 30 s) is warm-up: buffers, connection pools and the JetStream store's
// caches reach their working size. The rest is cut in fifths, and each
// series' level in a fifth is the 90th percentile of its samples there:
// near the top of GC's sawtooth, which every fifth reaches many times (it
// holds many GC cycles), but not one sample's spike (a burst of deliveries
// in flight after the machine stalled the daemon). A leak raises the level
// of the last fifth over that of the first; the sawtooth does not. Each
// growth must be at most 10 % (for memory, or at most 1 MiB). Every job
// offered must be delivered by the end.
func TestSteadyLoadNoGrowth(t *testing.T) {
	if *steady <= 0 {
		t.Skip("SKIPPED: the steady-load soak runs only when given a duration: -shaper.steady 2m (CI) or 30m")
	}
	if *steady < time.Minute {
		t.Fatalf("-shaper.steady %s: want at least 1m (30 s of warm-up, then five windows to compare)", *steady)
	}
	perLaneRate := 1000.0
	if raceEnabled {
		// The race detector slows the test's own NATS server and
		// downstreams (not the daemon, built without it) several times:
		// at 1 000/s a lane they fell behind, the queues reached 3 500
		// jobs and the daemon's heap grew with them.
		perLaneRate = 250
	}
	srv := runNATS(t)
	sinks := map[string]*countingSink{}
	conf := fmt.Sprintf("nats: { url: %q }\nadmin: { listen: \"%%ADMIN%%\" }\nshutdown_grace: 2s\ndownstreams:", srv.ClientURL())
	for _, l := range steadyLanes {
		sinks[l.name] = newCountingSink(t)
		// Concurrency 4 is twice what 1 250/s needs at 1.6 ms a delivery,
		// and few enough that the load keeps every connection of the
		// sink's pool in use: with 16, the pool grew with each stall and
		// shrank 90 s later (the idle timeout), and fds and goroutines
		// swung by 30 % in a 2-minute run. Job records are on (the
		// default); a memory queue's fill up to max_records and stay
		// there: 10 000 are reached within the warm-up, so what is
		// measured is the level they keep, not their filling (100 000,
		// the default, take 100 s at 1 000 jobs/s).
		conf += fmt.Sprintf(`
  %s:
    rate: %g/s
    concurrency: 4
    queue: { capacity: 100000, backend: %s }
    sink: { http: { url: %q, timeout: 5s } }
    outcomes: { max_records: 10000 }
`, l.name, perLaneRate*1.25, l.backend, sinks[l.name].URL)
	}
	p := startShaperd(t, conf)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	every := min(max(*steady/150, time.Second), 5*time.Second)
	warm := max(*steady/5, 30*time.Second)
	begin := time.Now()
	stop := make(chan struct{})
	stopPublishing := sync.OnceFunc(func() { close(stop) })
	defer stopPublishing() // a failed scrape leaves no publisher behind
	offered := make(chan int64, 1)
	go func() { offered <- publishSteadily(nc, perLaneRate, begin, stop) }()

	var samples []steadySample
	tick := time.NewTicker(every)
	for now := range tick.C {
		samples = append(samples, steadySample{at: now.Sub(begin), m: scrape(t, p.admin+"/metrics")})
		if now.Sub(begin) >= *steady {
			break
		}
	}
	tick.Stop()
	stopPublishing()
	sent := <-offered // jobs offered to each lane
	elapsed := time.Since(begin)
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	// Every job offered is delivered: wait for the stragglers in the
	// queues, then look for any id the downstreams never saw.
	deadline := time.Now().Add(time.Minute)
	for _, l := range steadyLanes {
		for sinks[l.name].distinct() < sent && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
	}
	end := scrape(t, p.admin+"/metrics")
	for _, l := range steadyLanes {
		s := sinks[l.name]
		missing := s.missing(sent)
		lbl := fmt.Sprintf("{downstream=%q}", l.name)
		t.Logf("%s (%s queue): offered %d (%.1f/s), accepted %.0f, delivered %d distinct (%.1f/s), %d duplicate, missing %d; queue depth max %.0f, end %.0f",
			l.name, l.backend, sent, float64(sent)/elapsed.Seconds(),
			end["shaper_jobs_accepted_total"+lbl], s.distinct(), float64(s.distinct())/elapsed.Seconds(),
			s.hits()-s.distinct(), len(missing), seriesMax(samples, "shaper_queue_depth"+lbl), end["shaper_queue_depth"+lbl])
		if len(missing) > 0 {
			t.Errorf("%s: %d of %d jobs offered never delivered, e.g. %v; rejected: %v", l.name, len(missing), sent,
				missing[:min(5, len(missing))], rejections(end, l.name))
		}
	}
	if want := 0.9 * perLaneRate * elapsed.Seconds(); float64(sent) < want {
		t.Errorf("offered %d jobs per lane in %s: under 90 %% of %g/s; the machine was too busy for the load the test is about",
			sent, elapsed.Round(time.Second), perLaneRate)
	}

	t.Logf("%d samples every %s over %s; warm-up %s; level of a fifth after it = the 90th percentile of its samples",
		len(samples), every, elapsed.Round(time.Second), warm)
	for _, name := range steadySeries {
		g := steadyGrowth(samples, name, warm)
		levels := make([]string, len(g.fifths))
		for i, v := range g.fifths {
			levels[i] = g.fmt(v)
		}
		t.Logf("%s: start %s, after warm-up %s, end %s, max %s; fifths %v: %+.1f %%",
			name, g.fmt(g.start), g.fmt(g.warm), g.fmt(g.end), g.fmt(g.max), levels, 100*g.growth)
		if g.growth > steadyMaxGrowth && !(g.bytes() && g.fifths[4]-g.fifths[0] <= steadyByteSlack) {
			t.Errorf("%s grew %.1f %% (last fifth %s, first fifth %s): over %.0f %%",
				name, 100*g.growth, levels[len(levels)-1], levels[0], 100*steadyMaxGrowth)
		}
	}
	// Not bounded, but read with the above: queued jobs are held in the
	// daemon's memory, so a queue deepening because the machine cannot
	// keep up grows the heap as a leak would.
	for _, l := range steadyLanes {
		g := steadyGrowth(samples, fmt.Sprintf("shaper_queue_depth{downstream=%q}", l.name), warm)
		t.Logf("queue depth of %s, fifths: %v", l.name, g.fifths)
	}
}

// publishSteadily publishes perLane jobs/s to each of steadyLanes from one
// goroutine, in the small batches due every 10 ms (a late tick sends what
// fell due meanwhile), until stop. Payloads are the sequence numbers 0, 1,
// 2, ... of each lane. It returns how many it sent to each.
func publishSteadily(nc *nats.Conn, perLane float64, begin time.Time, stop chan struct{}) int64 {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var sent int64
	buf := make([]byte, 0, 20)
	for {
		select {
		case <-stop:
			return sent
		case now := <-tick.C:
			due := int64(now.Sub(begin).Seconds() * perLane)
			for ; sent < due; sent++ {
				buf = strconv.AppendInt(buf[:0], sent, 10)
				for _, l := range steadyLanes {
					// A failed publish is a job the downstream never sees:
					// the delivery check reports it.
					_ = nc.Publish("shaper.jobs."+l.name, buf)
				}
			}
		}
	}
}

// countingSink is a downstream answering 200 that records which sequence
// numbers it saw in a bitmap, so a long run costs the test little memory.
type countingSink struct {
	*httptest.Server
	mu    sync.Mutex
	seen  []uint64
	n     int64 // distinct sequence numbers seen
	total int64 // requests
}

func newCountingSink(t *testing.T) *countingSink {
	s := &countingSink{}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *countingSink) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 32))
	seq, err := strconv.ParseInt(string(body), 10, 64)
	s.mu.Lock()
	s.total++
	if err == nil && seq >= 0 {
		for int64(len(s.seen))*64 <= seq {
			s.seen = append(s.seen, make([]uint64, max(1024, len(s.seen)))...)
		}
		if bit := uint64(1) << (seq % 64); s.seen[seq/64]&bit == 0 {
			s.seen[seq/64] |= bit
			s.n++
		}
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (s *countingSink) distinct() int64 { s.mu.Lock(); defer s.mu.Unlock(); return s.n }
func (s *countingSink) hits() int64     { s.mu.Lock(); defer s.mu.Unlock(); return s.total }

// missing returns the sequence numbers below n never seen.
func (s *countingSink) missing(n int64) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int64
	for seq := range n {
		if seq/64 >= int64(len(s.seen)) || s.seen[seq/64]&(1<<(seq%64)) == 0 {
			out = append(out, seq)
		}
	}
	return out
}

// rejections returns a lane's non-zero rejection and drop counts.
func rejections(m map[string]float64, lane string) map[string]float64 {
	out := map[string]float64{}
	for _, r := range []string{"rate_limited", "queue_full", "would_expire", "unavailable", "payload_too_large", "bad_request"} {
		if v := m[fmt.Sprintf("shaper_jobs_rejected_total{downstream=%q,reason=%q}", lane, r)]; v > 0 {
			out[r] = v
		}
	}
	if v := m["shaper_intake_slow_consumer_dropped_total"]; v > 0 {
		out["intake_slow_consumer_dropped"] = v
	}
	return out
}

// steadySample is one scrape of /metrics, at an offset from the start.
type steadySample struct {
	at time.Duration
	m  map[string]float64
}

// steadyLevels is one series over a soak run.
type steadyLevels struct {
	name                  string
	start, warm, end, max float64
	fifths                []float64 // the level of each fifth after warm-up
	growth                float64   // last fifth's level / first's - 1
}

// steadyGrowth cuts the samples after warm-up in fifths and compares the
// level (90th percentile) of series in the last with that in the first.
func steadyGrowth(samples []steadySample, series string, warm time.Duration) steadyLevels {
	g := steadyLevels{name: series, start: samples[0].m[series], end: samples[len(samples)-1].m[series]}
	var after []float64
	for _, s := range samples {
		g.max = max(g.max, s.m[series])
		if s.at >= warm {
			after = append(after, s.m[series])
		}
	}
	g.warm = after[0]
	for i := range 5 {
		g.fifths = append(g.fifths, quantile(after[i*len(after)/5:(i+1)*len(after)/5], 0.9))
	}
	g.growth = g.fifths[4]/g.fifths[0] - 1
	return g
}

// bytes reports whether the series counts bytes.
func (g steadyLevels) bytes() bool {
	return g.name == "process_resident_memory_bytes" || g.name == "go_memstats_heap_inuse_bytes"
}

// fmt renders a value of the series: bytes in MiB, counts as they are.
func (g steadyLevels) fmt(v float64) string {
	if g.bytes() {
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// quantile returns the q-quantile of vs (nearest rank), NaN if vs is empty.
func quantile(vs []float64, q float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	sorted := slices.Clone(vs)
	slices.Sort(sorted)
	return sorted[max(0, int(math.Ceil(q*float64(len(sorted))))-1)]
}

func seriesMax(samples []steadySample, series string) float64 {
	m := 0.0
	for _, s := range samples {
		m = max(m, s.m[series])
	}
	return m
}
