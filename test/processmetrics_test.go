package test

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scrape returns the series of the text exposition at url (name with its
// labels as exposed → value), e.g. go_goroutines or
// shaper_queue_depth{downstream="printer"}.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		// The value follows the last space: a label value may hold spaces.
		i := strings.LastIndexByte(line, ' ')
		if i < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		name, val := line[:i], line[i+1:]
		f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", url, line, err)
		}
		out[name] = f
	}
	return out
}

// The shaperd binary's /metrics carries the Go runtime's and its own
// process's series, the ones operators' dashboards and restart and leak
// alerts read, with values that are this process's: its start time lies
// between the test's exec and the daemon being ready.
func TestProcessMetrics(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	before := time.Now()
	p := startShaperd(t, fmt.Sprintf("nats: { url: %q }\nadmin: { listen: \"%%ADMIN%%\" }\nshutdown_grace: 1s\ndownstreams:%s",
		srv.ClientURL(), lane("printer", "2/s", 10, "", ds.URL)))
	ready := time.Now()
	m := scrape(t, p.admin+"/metrics")

	for _, name := range []string{"go_goroutines", "go_memstats_heap_inuse_bytes", "go_threads"} {
		if m[name] <= 0 {
			t.Errorf("/metrics: %s = %v, want a positive value (missing?)", name, m[name])
		}
	}
	if runtime.GOOS != "linux" {
		t.Skipf("SKIPPED the process_* checks on %s: client_golang's process collector reads /proc; "+
			"the go_* series were checked", runtime.GOOS)
	}
	for _, name := range []string{"process_resident_memory_bytes", "process_open_fds", "process_max_fds",
		"process_start_time_seconds", "process_cpu_seconds_total"} {
		if _, ok := m[name]; !ok {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if rss := m["process_resident_memory_bytes"]; rss < 1<<20 {
		t.Errorf("process_resident_memory_bytes = %v, want at least 1 MiB", rss)
	}
	// At least stdin, stdout, stderr, the admin listener and the NATS connection.
	if fds, maxFDs := m["process_open_fds"], m["process_max_fds"]; fds < 5 || fds > maxFDs {
		t.Errorf("process_open_fds = %v, process_max_fds = %v: want 5 <= open <= max", fds, maxFDs)
	}
	// /proc gives the boot time in whole seconds: allow one more below.
	start := time.Unix(0, int64(m["process_start_time_seconds"]*1e9))
	if start.Before(before.Add(-2*time.Second)) || start.After(ready.Add(time.Second)) {
		t.Errorf("process_start_time_seconds = %s, want the daemon's start, between %s and %s",
			start.Format(time.RFC3339Nano), before.Format(time.RFC3339Nano), ready.Format(time.RFC3339Nano))
	}
}
