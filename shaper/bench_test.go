package shaper

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shaperd/shaper/queue"
)

// These benchmarks run in real time for a fixed span, whatever b.N is; run
// them with -benchtime=1x. They report custom metrics:
//   achieved/configured  long-run achieved rate ÷ configured rate
//   p50_lag_ms … max_lag_ms  how late starts are behind their schedule slot
//                        (t0 + k/rate), measured when Deliver is entered
//   max100ms_excess      most starts in any 100 ms window minus rate×0.1
//   max100ms_excess_dispatch  the same over the scheduler's dispatch instants
//   max250ms_excess      the same for 250 ms (the pacing bound allows rate×0.025+1)
//   cpu_%core            process CPU (user+sys, getrusage) ÷ wall time

// steadyProfile is where runBench writes a CPU profile of the span its
// CPU figure covers only; -test.cpuprofile would include building the
// lanes.
var steadyProfile = flag.String("shaper.steadyprofile", "", "BenchmarkLanes10k and BenchmarkPacing: write a CPU profile of the measured span (not the set-up) to this file")

// stampSink records when each try is entered and how late that is.
type stampSink struct {
	noBatches
	mu   sync.Mutex
	at   []time.Time // when Deliver was entered
	disp []time.Time // when the scheduler dispatched the try
	lag  []time.Duration
}

func (s *stampSink) Deliver(_ context.Context, job *queue.Job) (Feedback, error) {
	now := time.Now()
	s.mu.Lock()
	s.at = append(s.at, now)
	s.disp = append(s.disp, job.Dispatched)
	s.lag = append(s.lag, now.Sub(job.Slot))
	s.mu.Unlock()
	return Feedback{}, nil
}

// runBench runs lanes for span, submitting jobs to each; lane i's jobs are
// submitted at i/len(lanes) × stagger (in batches every 10 ms), spreading
// the lanes' phases. CPU is measured from measureFrom to span.
func runBench(b *testing.B, lanes []LaneSettings, jobs int, stagger, span, measureFrom time.Duration) (map[string]*stampSink, float64) {
	sinks := map[string]*stampSink{}
	for _, ls := range lanes {
		sinks[ls.Name] = &stampSink{at: make([]time.Time, 0, jobs), disp: make([]time.Time, 0, jobs), lag: make([]time.Duration, 0, jobs)}
	}
	sh, err := New(Settings{Lanes: lanes, ShutdownGrace: time.Second}, Deps{
		Sinks: func(ls LaneSettings) (Sink, error) { return sinks[ls.Name], nil },
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sh.Run(ctx) }()
	<-sh.Ready()
	begin := time.Now()
	for i, ls := range lanes {
		if due := time.Duration(int64(stagger) * int64(i) / int64(len(lanes))); due-time.Since(begin) > 10*time.Millisecond {
			time.Sleep(due - time.Since(begin))
		}
		for range jobs {
			if rc := sh.Submit(&queue.Job{Downstream: ls.Name}); !rc.Accepted {
				b.Fatalf("submit: %+v", rc)
			}
		}
	}
	time.Sleep(measureFrom - time.Since(begin))
	stop := startProfile(b)
	cpu0, wall0 := cpuTime(), time.Now()
	time.Sleep(span - measureFrom)
	cpu := float64(cpuTime()-cpu0) / float64(time.Since(wall0)) * 100
	stop()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return sinks, cpu
}

// startProfile starts the CPU profile -shaper.steadyprofile asks for, if
// any, and returns what stops it.
func startProfile(b *testing.B) (stop func()) {
	if *steadyProfile == "" {
		return func() {}
	}
	f, err := os.Create(*steadyProfile)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportLags(b *testing.B, l []time.Duration) {
	slices.Sort(l)
	q := func(p float64) float64 { return float64(l[int(p*float64(len(l)-1))]) / 1e6 }
	b.ReportMetric(q(0.5), "p50_lag_ms")
	b.ReportMetric(q(0.99), "p99_lag_ms")
	b.ReportMetric(q(1), "max_lag_ms")
}

func BenchmarkPacing(b *testing.B) {
	for _, rate := range []float64{1, 100, 2000, 10000} {
		b.Run(fmt.Sprintf("rate=%g", rate), func(b *testing.B) {
			span := 3 * time.Second
			if rate == 1 {
				span = 5 * time.Second
			}
			jobs := int(rate*span.Seconds()) + 10
			// Concurrency 64: with 1, a start waits for the previous
			// delivery goroutine to have run, which on a loaded 2-core box
			// can take longer than 100 µs (the 10 000/s interval).
			ls := laneCfg("a", rate, jobs)
			ls.Concurrency = 64
			sinks, _ := runBench(b, []LaneSettings{ls}, jobs, 0, span, 0)
			at := sinks["a"].at
			slices.SortFunc(at, time.Time.Compare)
			if len(at) < 2 {
				b.Fatalf("%d starts", len(at))
			}
			achieved := float64(len(at)-1) / at[len(at)-1].Sub(at[0]).Seconds()
			b.ReportMetric(achieved/rate, "achieved/configured")
			reportLags(b, sinks["a"].lag)
			b.ReportMetric(float64(maxInWindow(at, 100*time.Millisecond))-rate*0.1, "max100ms_excess")
			b.ReportMetric(float64(maxInWindow(at, 250*time.Millisecond))-rate*0.25, "max250ms_excess")
			// The same over the instants the scheduler dispatched each
			// start: what the pacer decided, before goroutine start-up
			// jitter in the delivery path.
			disp := sinks["a"].disp
			slices.SortFunc(disp, time.Time.Compare)
			b.ReportMetric(float64(maxInWindow(disp, 100*time.Millisecond))-rate*0.1, "max100ms_excess_dispatch")
		})
	}
}

// maxInWindow is the most starts in any window of length w.
func maxInWindow(at []time.Time, w time.Duration) int {
	best, j := 0, 0
	for i := range at {
		for j < len(at) && at[j].Sub(at[i]) < w {
			j++
		}
		best = max(best, j-i)
	}
	return best
}

// BenchmarkLanes10k: 10 000 lanes at 1/s into a no-op sink, their phases
// spread over the first second (as independent arrivals would be); CPU is
// measured from 1.5 s (after the submissions) to 5 s.
func BenchmarkLanes10k(b *testing.B) {
	const n = 10000
	lanes := make([]LaneSettings, n)
	for i := range lanes {
		lanes[i] = laneCfg(fmt.Sprintf("l%05d", i), 1, 10)
	}
	const measureFrom = 1500 * time.Millisecond
	sinks, cpu := runBench(b, lanes, 6, time.Second, 5*time.Second, measureFrom)
	var all, steady []time.Duration
	starts := 0
	first := time.Time{}
	for _, s := range sinks {
		if len(s.at) > 0 && (first.IsZero() || s.at[0].Before(first)) {
			first = s.at[0]
		}
	}
	for _, s := range sinks {
		all = append(all, s.lag...)
		starts += len(s.at)
		for i, at := range s.at {
			// Steady state, as for the CPU figure: after the first second
			// built 10 000 lanes (and ~160 MB of heap, with the collector
			// marking it for a quarter of a second).
			if at.Sub(first) >= measureFrom {
				steady = append(steady, s.lag[i])
			}
		}
	}
	b.ReportMetric(cpu, "cpu_%core")
	b.ReportMetric(float64(starts)/n, "starts/lane")
	reportLags(b, all)
	slices.Sort(steady)
	q := func(p float64) float64 { return float64(steady[int(p*float64(len(steady)-1))]) / 1e6 }
	b.ReportMetric(q(0.99), "steady_p99_lag_ms")
	b.ReportMetric(q(1), "steady_max_lag_ms")
}

// BenchmarkSubmitParallel measures Submit into four lanes from every P.
func BenchmarkSubmitParallel(b *testing.B) {
	lanes := []LaneSettings{laneCfg("a", 1, 1<<30), laneCfg("b", 1, 1<<30), laneCfg("c", 1, 1<<30), laneCfg("d", 1, 1<<30)}
	sh, err := New(Settings{Lanes: lanes}, Deps{Sinks: func(LaneSettings) (Sink, error) { return &stampSink{}, nil }})
	if err != nil {
		b.Fatal(err)
	}
	names := []string{"a", "b", "c", "d"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			if rc := sh.Submit(&queue.Job{ID: "x", Downstream: names[i%4]}); !rc.Accepted {
				b.Fatalf("%+v", rc)
			}
		}
	})
}
