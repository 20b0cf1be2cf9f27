package test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// The backlog bench: a jetstream queue a million jobs deep, with
// priorities and fairness, seen from outside.
//
//	go test ./test -run '^TestBacklogBench$' -shaper.backlogbench -count=1 -v -timeout 30m
//
// It builds shaperd and nats-server (the version in go.mod) and runs them
// as processes, so that shaperd's own memory is seen. Downstream deep
// (priorities: 3, fairness: key, rate 2 000/s, concurrency 16, paused) is
// filled with 850 000 jobs of 1 KiB over 1 000 keys and three levels; three
// rounds of 50 000 more, alternating with 50 000 into an empty queue of
// the same settings, measure intake (64 producers) into the deep queue
// against the shallow one, and leave the deep queue 1 000 000 deep (its
// capacity, the largest there is). It reports shaperd's RSS before and
// after; then kill -9 and a restart with the backlog: time to ready,
// RSS, the first start after resume, and the achieved drain rate over
// 10 s against the configured 2 000/s. Last, the same fill into shaperd
// with its embedded NATS server: the whole process's RSS.
var (
	backlogBench     = flag.Bool("shaper.backlogbench", false, "run TestBacklogBench: a million-job backlog (see BENCHMARKS.md)")
	backlogBenchJobs = flag.Int("shaper.backlogbench.jobs", 1_000_000, "TestBacklogBench: jobs in the backlog")
)

const backlogBenchLanes = `
downstreams:
  deep:
    rate: 2000/s
    concurrency: 16
    queue: { priorities: 3, fairness: key, capacity: 1000000, backend: jetstream }
    sink: { http: { url: %[1]q, timeout: 5s } }
  empty:
    rate: 2000/s
    concurrency: 16
    queue: { priorities: 3, fairness: key, capacity: 1000000, backend: jetstream }
    sink: { http: { url: %[1]q, timeout: 5s } }
`

func TestBacklogBench(t *testing.T) {
	if !*backlogBench {
		t.Skip("SKIPPED: the backlog bench runs only when asked: -shaper.backlogbench (see BENCHMARKS.md)")
	}
	n := *backlogBenchJobs
	dir := t.TempDir()
	server := goBuild(t, dir, "nats-server", "github.com/nats-io/nats-server/v2")
	shaperd := goBuild(t, dir, "shaperd", "./cmd/shaperd")
	e := &benchEnv{t: t, home: t.TempDir()}
	srvAddr := freeAddr(t)
	host, port, _ := strings.Cut(srvAddr, ":")
	e.server = e.startProc("nats-server", server, nil, "-js", "-sd", t.TempDir(), "-a", host, "-p", port)
	url := "nats://" + srvAddr
	nc := connectWithin(t, url, 20*time.Second)
	defer nc.Close()
	ds := newDownstream(t)

	admin := freeAddr(t)
	conf := filepath.Join(t.TempDir(), "shaper.yaml")
	body := fmt.Sprintf("nats: { url: %q }\nadmin: { listen: %q }\nshutdown_grace: 1s\ningress: { max_payload: 4KiB }\n", url, admin) +
		fmt.Sprintf(backlogBenchLanes, ds.URL)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func() (*proc, time.Duration) {
		began := time.Now()
		p := e.startProc("shaperd", shaperd, nil, "-config", conf)
		if err := readyOrExit("http://"+admin, p.exited, p.stderr); err != nil {
			t.Fatal(err)
		}
		p.admin = "http://" + admin
		return p, time.Since(began)
	}
	p, _ := start()
	p.post(t, "/v1/downstreams/deep/pause")
	p.post(t, "/v1/downstreams/empty/pause")
	mib := func(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
	heap := func(p *proc) string { // the Go heap in use: what is live, against the RSS
		in := &instance{admin: p.admin}
		return mib(int64(in.metric(t, "go_memstats_heap_inuse_bytes")))
	}
	rss0 := rssBytes(t, p.cmd.Process.Pid)
	filled := time.Now()
	rate := benchFill(t, nc, "shaper.jobs.deep", n-150_000, 0)
	rss1 := rssBytes(t, p.cmd.Process.Pid)
	t.Logf("filled deep with %d jobs in %v (%.0f accepted/s); shaperd RSS %s before, %s after (+%s)",
		n-150_000, time.Since(filled).Round(time.Second), rate, mib(rss0), mib(rss1), mib(rss1-rss0))

	for round := range 3 {
		for _, to := range []string{"empty", "deep"} {
			r := benchFill(t, nc, "shaper.jobs."+to, 50_000, n-150_000+round*50_000)
			t.Logf("round %d: intake into %s: %.0f accepted/s", round+1, to, r)
		}
	}
	rss2 := rssBytes(t, p.cmd.Process.Pid)
	t.Logf("shaperd RSS with deep %d jobs deep (and 150 000 in empty): %s, +%s since start; Go heap in use %s", n, mib(rss2), mib(rss2-rss0), heap(p))

	p.kill(t)
	p, ready := start()
	rss3 := rssBytes(t, p.cmd.Process.Pid)
	time.Sleep(5 * time.Second)
	rss4 := rssBytes(t, p.cmd.Process.Pid)
	t.Logf("restarted with the backlog: ready in %v; RSS %s at ready, %s 5 s later", ready.Round(time.Millisecond), mib(rss3), mib(rss4))
	before := len(ds.snapshot())
	resumed := time.Now()
	p.post(t, "/v1/downstreams/deep/resume")
	hits := ds.waitHits(t, before+1, 10*time.Second)
	t.Logf("first start %v after resume", hits[before].at.Sub(resumed).Round(time.Millisecond))
	time.Sleep(2 * time.Second) // past the start
	from, mark := time.Now(), len(ds.snapshot())
	time.Sleep(10 * time.Second)
	got := len(ds.snapshot()) - mark
	rss5 := rssBytes(t, p.cmd.Process.Pid)
	t.Logf("drain with the backlog: %d starts in %v = %.1f/s against 2000/s (%.2f %%); RSS %s, Go heap in use %s",
		got, time.Since(from).Round(time.Millisecond), float64(got)/time.Since(from).Seconds(),
		100*float64(got)/time.Since(from).Seconds()/2000, mib(rss5), heap(p))
	p.kill(t)

	// The embedded server: the whole process.
	admin2 := freeAddr(t)
	conf2 := filepath.Join(t.TempDir(), "embedded.yaml")
	natsAddr := freeAddr(t)
	body = fmt.Sprintf("nats: { embedded: { listen: %q, store_dir: %q } }\nadmin: { listen: %q }\nshutdown_grace: 1s\ningress: { max_payload: 4KiB }\n",
		natsAddr, t.TempDir(), admin2) + fmt.Sprintf(backlogBenchLanes, ds.URL)
	if err := os.WriteFile(conf2, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	pe := e.startProc("shaperd", shaperd, nil, "-config", conf2)
	if err := readyOrExit("http://"+admin2, pe.exited, pe.stderr); err != nil {
		t.Fatal(err)
	}
	pe.admin = "http://" + admin2
	pe.post(t, "/v1/downstreams/deep/pause")
	nce := connectWithin(t, "nats://"+natsAddr, 20*time.Second)
	defer nce.Close()
	e0 := rssBytes(t, pe.cmd.Process.Pid)
	benchFill(t, nce, "shaper.jobs.deep", n, 0)
	e1 := rssBytes(t, pe.cmd.Process.Pid)
	t.Logf("embedded NATS: shaperd RSS %s empty, %s with %d queued jobs", mib(e0), mib(e1), n)
}

// benchFill sends n 1 KiB jobs to subject from 64 producers by
// request/reply, job i (counted from first) with priority i%3 and key
// tenant-(i%1000), fails unless all were accepted (fillQueue), and returns
// the accepted jobs per second.
func benchFill(t *testing.T, nc *nats.Conn, subject string, n, first int) float64 {
	t.Helper()
	payload := make([]byte, 1024)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	began := time.Now()
	fillQueue(t, nc, subject, n, payload, func(i int) nats.Header {
		k := first + i
		return nats.Header{"Shaper-Priority": {strconv.Itoa(k % 3)}, "Shaper-Key": {fmt.Sprintf("tenant-%d", k%1000)}}
	})
	return float64(n) / time.Since(began).Seconds()
}
