package admin

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shaperd/shaper/config"
	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/outcome"
)

// testAdmin is a started admin server over fake downstreams that a test
// sets as it likes. It is never ready: /readyz lists notRunning.
type testAdmin struct {
	lanes   *fakeLanes
	dead    *fakeDeadStats
	history *History
	jobs    *fakeJobs
	url     string // http(s)://host:port
	logs    *syncBuffer
}

const notRunning = "not running (starting or shutting down)"

// startTestAdmin starts a server on admin (Listen "" is 127.0.0.1:0) over
// idle downstreams of the given names, each of rate 2/s and capacity 10.
// The history samples every 10 ms once the test starts it.
func startTestAdmin(t *testing.T, admin config.Admin, lanes ...string) *testAdmin {
	t.Helper()
	if admin.Listen == "" {
		admin.Listen = "127.0.0.1:0"
	}
	a := &testAdmin{lanes: newFakeLanes(lanes...), dead: &fakeDeadStats{stats: map[string]deadEntry{}},
		history: NewHistory(10*time.Millisecond, nil), logs: &syncBuffer{}}
	a.jobs = &fakeJobs{lanes: a.lanes, latest: map[string][]outcome.Record{}}
	srv, err := Start(admin, Deps{
		Logger:      slog.New(slog.NewTextHandler(a.logs, nil)),
		Registry:    prometheus.NewRegistry(),
		Downstreams: func() Downstreams { return a.lanes },
		NotReady:    func() []string { return []string{notRunning} },
		History:     a.history,
		DeadStats:   a.dead.Stats,
		Jobs:        func() Jobs { return a.jobs },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop admin: %v", err)
		}
	})
	scheme := "http://"
	if admin.TLS.CertFile != "" {
		scheme = "https://"
	}
	a.url = scheme + srv.Addr()
	return a
}

func adminLoopback() config.Admin { return config.Admin{Listen: "127.0.0.1:0"} }

// fakeLanes stands in for the shaper: a fixed set of lane statuses that
// tests edit, paused and resumed through the API. Safe for concurrent use.
type fakeLanes struct {
	mu    sync.Mutex
	lanes []shaper.LaneStatus // sorted by name, as the shaper's
}

func newFakeLanes(names ...string) *fakeLanes {
	f := &fakeLanes{}
	for _, name := range slices.Sorted(slices.Values(names)) {
		f.lanes = append(f.lanes, shaper.LaneStatus{
			Name: name, Rate: 2, Capacity: 10,
			Rejected: map[shaper.Reason]uint64{}, Dropped: map[shaper.Reason]uint64{},
			Delivered: map[shaper.Outcome]uint64{},
		})
	}
	return f
}

// Lanes returns copies: a caller never shares the maps with a later edit.
func (f *fakeLanes) Lanes() []shaper.LaneStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(f.lanes)
	for i := range out {
		out[i].Rejected = maps.Clone(out[i].Rejected)
		out[i].Dropped = maps.Clone(out[i].Dropped)
		out[i].Delivered = maps.Clone(out[i].Delivered)
	}
	return out
}

func (f *fakeLanes) Pause(name string, until time.Time, _ string) error {
	return f.edit(name, func(st *shaper.LaneStatus) {
		st.Paused, st.PausedUntil = true, nil
		if !until.IsZero() {
			st.PausedUntil = &until
		}
	})
}

func (f *fakeLanes) Resume(name, _ string) error {
	return f.edit(name, func(st *shaper.LaneStatus) { st.Paused, st.PausedUntil = false, nil })
}

func (f *fakeLanes) SetOverride(name string, o shaper.Override, _ string) error {
	if o.Capacity > 0 && o.Capacity < 2 { // as a lane whose max_cost is 2
		return fmt.Errorf("%w: capacity below max cost 2", shaper.ErrInvalidOverride)
	}
	return f.edit(name, func(st *shaper.LaneStatus) {
		cur := shaper.Override{}
		if st.Override != nil {
			cur = *st.Override
		}
		if o.Rate != 0 {
			cur.Rate, st.Rate = o.Rate, o.Rate
		}
		if o.Concurrency != 0 {
			cur.Concurrency, st.Concurrency = o.Concurrency, o.Concurrency
		}
		if o.Capacity != 0 {
			cur.Capacity, st.Capacity = o.Capacity, o.Capacity
		}
		st.Override = &cur
	})
}

func (f *fakeLanes) ClearOverride(name, _ string) error {
	return f.edit(name, func(st *shaper.LaneStatus) { st.Override, st.Rate, st.Capacity = nil, 2, 10 })
}

// edit changes the named lane's status as the shaper would; an unknown name
// is shaper.ErrUnknownDownstream.
func (f *fakeLanes) edit(name string, change func(*shaper.LaneStatus)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.lanes {
		if f.lanes[i].Name == name {
			change(&f.lanes[i])
			return nil
		}
	}
	return fmt.Errorf("pause %q: %w", name, shaper.ErrUnknownDownstream)
}

// fill queues n jobs on lane as a shaper with capacity 10 would: up to
// capacity are accepted, the rest are refused queue_full.
func (f *fakeLanes) fill(name string, n int) {
	_ = f.edit(name, func(st *shaper.LaneStatus) {
		for range n {
			st.Received++
			if st.Depth < st.Capacity {
				st.Depth++
				st.Accepted++
			} else {
				st.Rejected[shaper.ReasonQueueFull]++
			}
		}
	})
}

// fakeDeadStats stands in for the daemon's dead-letter store: a downstream it
// has no entry for has no store. Safe for concurrent use.
type fakeDeadStats struct {
	mu    sync.Mutex
	stats map[string]deadEntry
}

type deadEntry struct {
	stored int
	oldest time.Time
}

func (f *fakeDeadStats) set(name string, stored int, oldest time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats[name] = deadEntry{stored, oldest}
}

func (f *fakeDeadStats) Stats(_ context.Context, name string) (int, time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.stats[name]
	return e.stored, e.oldest, ok
}

// call does one request and returns status, headers and body. The client
// keeps no idle connections, so goleak sees none after the test.
func call(t *testing.T, c *http.Client, req *http.Request) (int, http.Header, string) {
	t.Helper()
	if c == nil {
		c = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func get(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return call(t, nil, req)
}

func post(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	status, _, body := call(t, nil, req)
	return status, body
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fakeJobs stands in for the shaper's job records: each downstream's
// latest finished jobs, as a test sets them. It knows no single job.
// Safe for concurrent use.
type fakeJobs struct {
	lanes  *fakeLanes
	mu     sync.Mutex
	latest map[string][]outcome.Record // newest first
}

func (f *fakeJobs) set(name string, recs ...outcome.Record) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.latest[name] = recs
}

// Job knows no job; an unknown downstream is shaper.ErrUnknownDownstream.
func (f *fakeJobs) Job(_ context.Context, downstream, _ string) (outcome.Record, bool, bool, error) {
	for _, st := range f.lanes.Lanes() {
		if st.Name == downstream {
			return outcome.Record{}, false, false, nil
		}
	}
	return outcome.Record{}, false, false, fmt.Errorf("job of %q: %w", downstream, shaper.ErrUnknownDownstream)
}

func (f *fakeJobs) LatestJobs(downstream string) []outcome.Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.latest[downstream])
}
