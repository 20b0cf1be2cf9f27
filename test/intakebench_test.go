package test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The intake bench: shaperd's intake against what the same clients get
// from NATS itself, measured by natscli v0.5.0 in one run:
//
//	go test ./test -run '^TestIntakeBench$' -shaper.intakebench -count=1 -v -timeout 20m
//
// It builds shaperd, nats-server (the version in go.mod) and natscli,
// starts the server (file storage) and shaperd as processes, and alternates
// rounds of four paths, 32 clients, 128 B payloads: (a) `nats bench js pub
// sync` to a bare stream with the settings of shaperd's queue streams,
// (b) `nats bench service request` to shaperd's intake of a jetstream
// downstream, (c) the same for a memory downstream, (d) the same to `nats
// bench service serve`, the echo service. Both downstreams drain 1 job/s,
// so their queues (capacity 1 000 000) absorb every job and the drain
// costs nothing. Two more paths are the floor any intake in front of NATS
// has on this machine: (e) and (f), `nats bench service request` to
// benchrelay (test/benchrelay), a relay that does nothing but store each
// payload pipelined and answer on its PubAck (e), or answer at once (f),
// with a reply of the size of shaperd's. It prints each round, the ratios
// of the medians (b)/(a), (c)/(d), (e)/(a), (f)/(d), (b)/(e) and (c)/(f),
// the CPU each process spent per job, then accept latency at half the
// jetstream intake's throughput and for a lone producer.
// With -shaper.intakebench.profile DIR it then runs each path once more
// and writes CPU profiles of shaperd (built with -tags shaperd_pprof) and
// nats-server there.
var (
	intakeBench        = flag.Bool("shaper.intakebench", false, "run TestIntakeBench: shaperd's intake against bare NATS, by natscli")
	intakeBenchRounds  = flag.Int("shaper.intakebench.rounds", 4, "TestIntakeBench: alternating rounds")
	intakeBenchMsgs    = flag.Int("shaper.intakebench.msgs", 60000, "TestIntakeBench: messages per path and round")
	intakeBenchProfile = flag.String("shaper.intakebench.profile", "", "TestIntakeBench: write CPU profiles of shaperd and nats-server per path to this directory")
	intakeBenchBase    = flag.String("shaper.intakebench.baseline", "", "TestIntakeBench: also run shaperd built at this git revision, on intake subjects base.jobs.<downstream>")
)

// benchClients is the producers in flight on every path.
const benchClients = 32

// benchPath is one path of the bench: the natscli arguments after
// "bench" (without the server, clients and message count).
type benchPath struct {
	name string
	args []string
}

// benchResult is one natscli run: throughput, its latencies and the CPU
// seconds each process spent on it.
type benchResult struct {
	rate           float64 // msgs/s, natscli's aggregate
	p50, p99       float64 // ms per operation
	server, client float64 // CPU seconds: nats-server, natscli
	responder      float64 // CPU seconds: shaperd and the echo service (one of them works)
	msgs           int
	wall           time.Duration
	out            string
}

func TestIntakeBench(t *testing.T) {
	if !*intakeBench {
		t.Skip("SKIPPED: the intake bench runs only when asked: -shaper.intakebench (see BENCHMARKS.md)")
	}
	cli := natscliBinary(t)
	dir := t.TempDir()
	profiling := *intakeBenchProfile != ""
	server := goBuild(t, dir, "nats-server", "github.com/nats-io/nats-server/v2")
	var tags []string
	if profiling {
		tags = []string{"-tags", "shaperd_pprof"}
	}
	shaperd := goBuild(t, dir, "shaperd", "./cmd/shaperd", tags...)
	relay := goBuild(t, dir, "benchrelay", "./test/benchrelay")

	e := &benchEnv{t: t, nats: cli, home: t.TempDir()}
	srvAddr, srvProf := freeAddr(t), freeAddr(t)
	host, port, _ := strings.Cut(srvAddr, ":")
	srvArgs := []string{"-js", "-sd", t.TempDir(), "-a", host, "-p", port}
	if profiling {
		_, pp, _ := strings.Cut(srvProf, ":")
		srvArgs = append(srvArgs, "--profile", pp)
	}
	e.server = e.startProc("nats-server", server, nil, srvArgs...)
	e.url = "nats://" + srvAddr
	nc := connectWithin(t, e.url, 20*time.Second)
	defer nc.Close()
	createBareStream(t, nc, "BENCH_BARE", "bench.bare")
	createBareStream(t, nc, "BENCH_RELAY", "bench.relay")

	admin, sdProf := freeAddr(t), freeAddr(t)
	conf := filepath.Join(t.TempDir(), "shaper.yaml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(intakeBenchConfig, e.url, admin)), 0o600); err != nil {
		t.Fatal(err)
	}
	var env []string
	if profiling {
		env = []string{"SHAPERD_PPROF_LISTEN=" + sdProf}
	}
	e.shaperd = e.startProc("shaperd", shaperd, env, "-config", conf)
	if err := readyOrExit("http://"+admin, e.shaperd.exited, e.shaperd.stderr); err != nil {
		t.Fatal(err)
	}
	e.echo = e.startProc("echo", cli, nil, "-s", e.url, "bench", "service", "serve", "bench.echo", "--no-progress")
	e.relays = []*proc{
		e.startProc("benchrelay", relay, nil, "-s", e.url, "-subject", "relay.js", "-store", "bench.relay"),
		e.startProc("benchrelay", relay, nil, "-s", e.url, "-subject", "relay.mem"),
	}
	for _, p := range e.relays {
		if err := readyLine(p, "benchrelay: ready", 20*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	paths := []benchPath{
		{"js pub sync, bare stream", []string{"js", "pub", "sync", "bench.bare", "--stream", "BENCH_BARE"}},
		{"shaperd intake, jetstream", []string{"service", "request", "shaper.jobs.js"}},
		{"shaperd intake, memory", []string{"service", "request", "shaper.jobs.mem"}},
		{"service serve (echo)", []string{"service", "request", "bench.echo"}},
		{"bare relay, jetstream", []string{"service", "request", "relay.js"}},
		{"bare relay, memory", []string{"service", "request", "relay.mem"}},
	}
	if rev := *intakeBenchBase; rev != "" {
		e.startBaseline(rev, dir)
		paths = append(paths,
			benchPath{"baseline " + rev + ", jetstream", []string{"service", "request", "base.jobs.js"}},
			benchPath{"baseline " + rev + ", memory", []string{"service", "request", "base.jobs.mem"}})
	}
	results := make([][]benchResult, len(paths))
	for r := range *intakeBenchRounds {
		for k := range paths { // each round starts one path later: none always follows the same one
			i := (r + k) % len(paths)
			res := e.run(paths[i].args, "--clients", strconv.Itoa(benchClients), "--msgs", strconv.Itoa(*intakeBenchMsgs))
			results[i] = append(results[i], res)
			t.Logf("round %d  %-26s %8.0f msgs/s  p99 %6.2f ms", r+1, paths[i].name, res.rate, res.p99)
		}
	}
	med := e.report(paths, results)

	half := med[1] / 2
	e.latency("jetstream intake at half its throughput", paths[1], half, benchClients)
	e.latency("memory intake at the same rate", paths[2], half, benchClients)
	e.latency("js pub sync at the same rate", paths[0], half, benchClients)
	e.latency("jetstream intake, one producer at 100/s", paths[1], 100, 1)

	if profiling {
		e.profile(paths, *intakeBenchProfile, "http://"+srvProf, "http://"+sdProf)
	}
}

// intakeBenchConfig is shaperd's config: %s the NATS URL, %s the admin
// address. Both queues hold a whole run; the drain is too slow to matter.
const intakeBenchConfig = `
nats: { url: %q }
admin: { listen: %q }
shutdown_grace: 1s
downstreams:
  js:
    rate: 1/s
    queue: { capacity: 1000000, backend: jetstream }
    sink: { nats: { subject: bench.sink } }
  mem:
    rate: 1/s
    queue: { capacity: 1000000, backend: memory }
    sink: { nats: { subject: bench.sink } }
`

// startBaseline builds shaperd at git revision rev and starts it beside
// the other, with intake subjects, streams and records of its own (both
// idle but for the path that runs).
func (e *benchEnv) startBaseline(rev, dir string) {
	e.t.Helper()
	src := e.t.TempDir()
	archive := exec.Command("sh", "-c", "git archive --format=tar \"$0\" | tar -x -C \"$1\"", rev, src)
	archive.Dir = ".."
	if out, err := archive.CombinedOutput(); err != nil {
		e.t.Fatalf("git archive %s: %v\n%s", rev, err, out)
	}
	bin := filepath.Join(dir, "shaperd-baseline")
	build := exec.Command("go", "build", "-o", bin, "./cmd/shaperd")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		e.t.Fatalf("go build at %s: %v\n%s", rev, err, out)
	}
	admin := freeAddr(e.t)
	conf := filepath.Join(e.t.TempDir(), "shaper.yaml")
	body := strings.Replace(fmt.Sprintf(intakeBenchConfig, e.url, admin), "\nnats: { url: ",
		"\ningress: { subject_prefix: base.jobs }\nnats: { jetstream: { stream_prefix: BASE, subject_prefix: base.queue }, url: ", 1)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		e.t.Fatal(err)
	}
	e.base = e.startProc("shaperd-baseline", bin, nil, "-config", conf)
	if err := readyOrExit("http://"+admin, e.base.exited, e.base.stderr); err != nil {
		e.t.Fatal(err)
	}
}

// createBareStream creates the stream of path (a) or (e) with the
// settings of a shaperd queue stream: file, one replica, work queue,
// discard new, the same bound and duplicate window.
func createBareStream(t *testing.T, nc *nats.Conn, name, subject string) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{subject}, Retention: jetstream.WorkQueuePolicy,
		Storage: jetstream.FileStorage, Replicas: 1, MaxMsgs: 1000000, MaxBytes: -1,
		Discard: jetstream.DiscardNew, Duplicates: 2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
}

// benchEnv is the bench's processes.
type benchEnv struct {
	t                     *testing.T
	nats, url, home       string
	server, shaperd, echo *proc
	relays                []*proc // benchrelay, durable and memory
	base                  *proc   // shaperd at -shaper.intakebench.baseline, or nil
}

// startProc starts a process killed at cleanup (SIGKILL: a memory queue
// holding a run's jobs would dead-letter them all on a graceful stop).
func (e *benchEnv) startProc(name, bin string, env []string, args ...string) *proc {
	e.t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), exited: make(chan error, 1), stderr: &syncBuffer{}}
	p.cmd.Env = append(e.env(), env...)
	p.cmd.Stderr, p.cmd.Stdout = p.stderr, p.stderr
	if err := p.cmd.Start(); err != nil {
		e.t.Fatalf("%s: %v", name, err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	e.t.Cleanup(func() { p.kill(e.t) })
	return p
}

// env is the environment of every process: none of the user's natscli
// contexts or NATS_* settings.
func (e *benchEnv) env() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NATS_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			out = append(out, kv)
		}
	}
	return append(out, "HOME="+e.home, "XDG_CONFIG_HOME="+filepath.Join(e.home, ".config"))
}

var (
	// natscli prints one client's figures on its "stats:" line, several
	// clients' aggregate on the last "stats:" and latency lines.
	aggregateRE = regexp.MustCompile(`stats: ([\d,.]+) msgs/sec`)
	p50RE       = regexp.MustCompile(`P50:? ([\d,.]+)us`)
	p99RE       = regexp.MustCompile(`P99:? ([\d,.]+)us`)
)

// run runs one natscli bench to its end and returns its figures.
func (e *benchEnv) run(path []string, extra ...string) benchResult {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append(append([]string{"-s", e.url, "bench"}, path...), extra...)
	cmd := exec.CommandContext(ctx, e.nats, append(args, "--no-progress")...)
	cmd.Env = e.env()
	srv0, resp0 := cpuSeconds(e.server), e.responders()
	start := time.Now()
	out, err := cmd.CombinedOutput()
	res := benchResult{wall: time.Since(start), out: string(out)}
	if err != nil {
		e.t.Fatalf("nats %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	res.server, res.responder = cpuSeconds(e.server)-srv0, e.responders()-resp0
	res.client = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	res.rate = parseNumber(e.t, aggregateRE, res.out)
	res.p50 = parseNumber(e.t, p50RE, res.out) / 1000
	res.p99 = parseNumber(e.t, p99RE, res.out) / 1000
	if i := slices.Index(extra, "--msgs"); i >= 0 {
		res.msgs, _ = strconv.Atoi(extra[i+1])
	}
	return res
}

func parseNumber(t *testing.T, re *regexp.Regexp, out string) float64 {
	t.Helper()
	all := re.FindAllStringSubmatch(out, -1)
	if all == nil {
		t.Fatalf("natscli output lacks %s:\n%s", re, out)
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(all[len(all)-1][1], ",", ""), 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// responders is the CPU of the processes that answer requests; only one
// of them works at a time.
func (e *benchEnv) responders() float64 {
	sum := cpuSeconds(e.shaperd) + cpuSeconds(e.echo)
	for _, p := range e.relays {
		sum += cpuSeconds(p)
	}
	if e.base != nil {
		sum += cpuSeconds(e.base)
	}
	return sum
}

// cpuSeconds is a process's user+system CPU so far, from /proc (0 where
// there is none).
func cpuSeconds(p *proc) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from the 3rd on
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ is 100 on Linux
}

// report prints the medians, ratios and CPU per job, and returns the
// median rates by path.
func (e *benchEnv) report(paths []benchPath, results [][]benchResult) []float64 {
	var b strings.Builder
	med := make([]float64, len(paths))
	fmt.Fprintf(&b, "\n| path | msgs/s by round | median | p99 ms (median) | µs CPU per job: nats-server / shaperd, echo or relay / natscli |\n|---|---|---:|---:|---|\n")
	for i, p := range paths {
		var rates, p99s, srv, sd, cl []float64
		for _, r := range results[i] {
			rates, p99s = append(rates, r.rate), append(p99s, r.p99)
			n := float64(r.msgs) / 1e6
			srv, sd, cl = append(srv, r.server/n), append(sd, r.responder/n), append(cl, r.client/n)
		}
		med[i] = median(rates)
		var each []string
		for _, r := range rates {
			each = append(each, fmt.Sprintf("%.0f", r))
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.2f | %.1f / %.1f / %.1f |\n", p.name, strings.Join(each, " / "),
			med[i], median(p99s), median(srv), median(sd), median(cl))
	}
	fmt.Fprintf(&b, "\njetstream intake / js pub sync = %.2f (target ≥ 0.9, floor 0.7)\n", med[1]/med[0])
	fmt.Fprintf(&b, "memory intake / service serve  = %.2f (target ≥ 1.0)\n", med[2]/med[3])
	fmt.Fprintf(&b, "bare relay, jetstream / js pub sync = %.2f (the most any relay gets here)\n", med[4]/med[0])
	fmt.Fprintf(&b, "bare relay, memory / service serve  = %.2f (the most any intake with this reply gets here)\n", med[5]/med[3])
	fmt.Fprintf(&b, "jetstream intake / bare relay  = %.2f (median of the rounds' ratios %.2f)\n", med[1]/med[4], pairedRatio(results[1], results[4]))
	fmt.Fprintf(&b, "memory intake / bare relay     = %.2f (median of the rounds' ratios %.2f)\n", med[2]/med[5], pairedRatio(results[2], results[5]))
	if len(paths) > 7 {
		fmt.Fprintf(&b, "jetstream intake / baseline    = %.3f (median of the rounds' ratios %.3f)\n", med[1]/med[6], pairedRatio(results[1], results[6]))
		fmt.Fprintf(&b, "memory intake / baseline       = %.3f (median of the rounds' ratios %.3f)\n", med[2]/med[7], pairedRatio(results[2], results[7]))
	}
	e.t.Log(b.String())
	return med
}

// pairedRatio is the median over rounds of a's rate over b's in the same
// round.
func pairedRatio(a, b []benchResult) float64 {
	var r []float64
	for i := range min(len(a), len(b)) {
		r = append(r, a[i].rate/b[i].rate)
	}
	return median(r)
}

// latency runs path at rate msgs/s for 5 s from clients and logs its
// accept latency.
func (e *benchEnv) latency(what string, path benchPath, rate float64, clients int) {
	e.t.Helper()
	r := e.run(path.args, "--clients", strconv.Itoa(clients), "--throughput", strconv.Itoa(int(rate)), "--duration", "5s")
	e.t.Logf("%-45s offered %6.0f/s, achieved %6.0f/s: p50 %.2f ms, p99 %.2f ms (target p99 ≤ 5 ms)", what, rate, r.rate, r.p50, r.p99)
}

// profile runs each path once more with five rounds' messages and
// writes 4 s CPU profiles of nats-server and shaperd taken in its middle.
func (e *benchEnv) profile(paths []benchPath, dir, server, shaperd string) {
	e.t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	for i, p := range paths {
		done := make(chan struct{})
		go func() {
			defer close(done)
			time.Sleep(500 * time.Millisecond)
			fetch := make(chan error, 2)
			for who, base := range map[string]string{"nats-server": server, "shaperd": shaperd} {
				go func() {
					fetch <- fetchProfile(base+"/debug/pprof/profile?seconds=4", filepath.Join(dir, fmt.Sprintf("%d-%s.pprof", i+1, who)))
				}()
			}
			for range 2 {
				if err := <-fetch; err != nil {
					e.t.Errorf("profile of %s: %v", p.name, err)
				}
			}
		}()
		r := e.run(p.args, "--clients", strconv.Itoa(benchClients), "--msgs", strconv.Itoa(5**intakeBenchMsgs))
		<-done
		if r.wall < 4500*time.Millisecond {
			e.t.Logf("%s took %s: the profile covers its end; raise -shaper.intakebench.msgs", p.name, r.wall.Round(time.Millisecond))
		}
		e.t.Logf("profiles of %q: %s/%d-{nats-server,shaperd}.pprof", p.name, dir, i+1)
	}
}

func fetchProfile(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.ReadFrom(resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// goBuild builds pkg (a path in this module, or a module's package at the
// version in go.mod) into dir/name.
func goBuild(t *testing.T, dir, name, pkg string, flags ...string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	args := append(append([]string{"build"}, flags...), "-o", out, pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = ".." // the module root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out
}

// connectWithin connects to url, trying again until within has passed
// (the server process is starting).
func connectWithin(t *testing.T, url string, within time.Duration) *nats.Conn {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		nc, err := nats.Connect(url)
		if err == nil {
			return nc
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server at %s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readyLine waits until p has printed line, or fails if it exits or
// within passes first.
func readyLine(p *proc, line string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for !strings.Contains(p.stderr.String(), line) {
		select {
		case err := <-p.exited:
			p.exited <- err // still there for kill, as readyOrExit leaves it
			return fmt.Errorf("%s exited (%v) before it was ready:\n%s", p.cmd.Path, err, p.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %s:\n%s", p.cmd.Path, within, p.stderr.String())
		}
	}
	return nil
}
