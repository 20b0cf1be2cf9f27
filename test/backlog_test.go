package test

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// rssBytes is a process's resident set, from /proc.
func rssBytes(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc to read the daemon's memory from: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// fillQueue sends n jobs of payload to subject by request/reply, 64 at a
// time, header(i) the i-th job's headers, and fails unless every one was
// accepted.
func fillQueue(t *testing.T, nc *nats.Conn, subject string, n int, payload []byte, header func(i int) nats.Header) {
	t.Helper()
	var next, refused atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				m := &nats.Msg{Subject: subject, Data: payload, Header: header(i)}
				r, err := nc.RequestMsg(m, 30*time.Second)
				switch {
				case err != nil:
					first.CompareAndSwap(nil, err.Error())
					refused.Add(1)
				case r.Header.Get("Shaper-Status") != "accepted":
					first.CompareAndSwap(nil, string(r.Data))
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if k := refused.Load(); k > 0 {
		t.Fatalf("%s: %d of %d jobs not accepted; first: %v", subject, k, n, first.Load())
	}
}

// A jetstream queue's backlog lives in its stream: 100 000 queued 1 KiB
// jobs on a queue with three levels, and 100 000 on a fair queue over
// 1 000 keys, add at most 64 MiB each to shaperd's memory beyond what the
// same count adds on a FIFO queue (the drainer holds a window of jobs and
// an entry per subject, not the jobs). After kill -9 the daemon is ready
// within 2 s, starts each downstream's first job within 1/rate + 1 s, and
// its memory stays bounded with the backlog intact.
func TestBacklogStaysInTheStream(t *testing.T) {
	if testing.Short() {
		t.Skip("fills three queues of 100 000 jobs (~40 s); run without -short")
	}
	// The daemon's collector runs often (GOGC=20), so that its RSS follows
	// what it keeps, not when its collector last ran: at the default the
	// same fills read tens of MiB apart from run to run.
	t.Setenv("GOGC", "20")
	srv := runNATS(t)
	ds := newDownstream(t)
	ds.delay = 10 * time.Millisecond
	const n = 100_000
	var lanes strings.Builder
	for _, l := range []struct{ name, queue string }{
		{"fifo", ""}, {"prio", "priorities: 3, "}, {"fair", "fairness: key, "},
	} {
		fmt.Fprintf(&lanes, `
  %s:
    rate: 1/s
    queue: { %scapacity: 150000, backend: jetstream }
    sink: { http: { url: %q, timeout: 2s } }`, l.name, l.queue, ds.URL+"/"+l.name)
	}
	conf := fmt.Sprintf(`
nats:
  url: %q
  jetstream: { ack_wait: 2s, pinned_ttl: 1s }
admin: { listen: "%%ADMIN%%" }
shutdown_grace: 2s
ingress: { max_payload: 4KiB }
downstreams:%s
`, srv.ClientURL(), lanes.String())
	p, in := startDurable(t, srv.ClientURL(), conf)
	pid := p.cmd.Process.Pid
	payload := make([]byte, 1024)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	rss := map[string]int64{"start": rssBytes(t, pid)}
	was := rss["start"]
	for _, l := range []struct {
		name   string
		header func(i int) nats.Header
	}{
		{"fifo", func(int) nats.Header { return nil }},
		{"prio", func(i int) nats.Header { return nats.Header{"Shaper-Priority": {strconv.Itoa(i % 3)}} }},
		{"fair", func(i int) nats.Header { return nats.Header{"Shaper-Key": {fmt.Sprintf("tenant-%d", i%1000)}} }},
	} {
		fillQueue(t, in.nc, "shaper.jobs."+l.name, n, payload, l.header)
		time.Sleep(2 * time.Second) // the drainer has read what it reads
		now := rssBytes(t, pid)
		rss[l.name], was = now-was, now
		t.Logf("%s: %+d MiB RSS for %d queued jobs", l.name, rss[l.name]>>20, n)
	}
	for _, name := range []string{"prio", "fair"} {
		if extra := rss[name] - rss["fifo"]; extra > 64<<20 {
			t.Errorf("%s: %d queued jobs added %d MiB to shaperd's RSS, %d MiB more than on a FIFO queue; want at most 64 MiB more",
				name, n, rss[name]>>20, extra>>20)
		}
	}
	before := rssBytes(t, pid)

	p.kill(t)
	restarted := time.Now()
	p = startShaperd(t, conf)
	ready := time.Since(restarted)
	t.Logf("ready %v after the restart with %d queued jobs", ready.Round(time.Millisecond), 3*n)
	if ready > 2*time.Second {
		t.Errorf("ready %v after the restart, want within 2 s", ready)
	}
	waitFor(t, 10*time.Second, func() bool {
		seen := map[string]bool{}
		for _, h := range ds.snapshot() {
			if h.at.After(restarted) {
				seen[strings.TrimPrefix(h.path, "/")] = true
			}
		}
		return seen["fifo"] && seen["prio"] && seen["fair"]
	}, "a start on every downstream after the restart")
	for _, name := range []string{"fifo", "prio", "fair"} {
		var first time.Time
		for _, h := range ds.snapshot() {
			if strings.TrimPrefix(h.path, "/") == name && h.at.After(restarted) && (first.IsZero() || h.at.Before(first)) {
				first = h.at
			}
		}
		if d := first.Sub(restarted) - ready; d > 2*time.Second {
			t.Errorf("%s: first start %v after ready, want within 1/rate + 1 s", name, d.Round(time.Millisecond))
		}
	}
	time.Sleep(2 * time.Second)
	after := rssBytes(t, p.cmd.Process.Pid)
	t.Logf("RSS %d MiB before kill -9, %d MiB after the restart", before>>20, after>>20)
	if after > before+64<<20 {
		t.Errorf("RSS %d MiB after the restart, %d MiB before kill -9: the backlog was loaded into memory", after>>20, before>>20)
	}
	for _, l := range p.lanes() {
		started := 0
		for _, h := range ds.snapshot() {
			if strings.TrimPrefix(h.path, "/") == l.Name {
				started++
			}
		}
		if l.Depth < n-started-5 || l.Depth > n {
			t.Errorf("%s: depth %d after the restart, want %d less the %d started", l.Name, l.Depth, n, started)
		}
	}
}
