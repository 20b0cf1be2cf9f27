package test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/cmd/shaperd/daemon"
)

// The runtime controls of the admin API against the whole daemon: timed
// pauses, maintenance windows, overrides, and how a jetstream downstream
// keeps and shares them.

// adminCall makes one admin request with a body ("" = none).
func adminCall(t *testing.T, base, method, path, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func mustCall(t *testing.T, base, method, path, body string) string {
	t.Helper()
	status, got := adminCall(t, base, method, path, body)
	if status != http.StatusOK {
		t.Fatalf("%s %s %s: %d %s", method, path, body, status, got)
	}
	return got
}

// runtimeRow is the part of a /v1/downstreams entry these tests read.
type runtimeRow struct {
	Name        string     `json:"name"`
	Rate        float64    `json:"rate"`
	Capacity    int        `json:"capacity"`
	Paused      bool       `json:"paused"`
	PausedUntil *time.Time `json:"paused_until"`
	Maintenance *struct {
		Start, End time.Time
		Active     bool
	} `json:"maintenance"`
	Override *struct {
		Rate        float64 `json:"rate"`
		Concurrency int     `json:"concurrency"`
		Capacity    int     `json:"capacity"`
	} `json:"override"`
}

// rowOf returns downstream name's row from the admin API at base; ok is
// false when it cannot answer.
func rowOf(base, name string) (runtimeRow, bool) {
	resp, err := http.Get(base + "/v1/downstreams")
	if err != nil {
		return runtimeRow{}, false
	}
	defer resp.Body.Close()
	var v struct {
		Downstreams []runtimeRow `json:"downstreams"`
	}
	if json.NewDecoder(resp.Body).Decode(&v) != nil {
		return runtimeRow{}, false
	}
	for _, r := range v.Downstreams {
		if r.Name == name {
			return r, true
		}
	}
	return runtimeRow{}, false
}

// eventually waits up to within for cond on name's row at base.
func eventually(t *testing.T, base, name string, within time.Duration, what string, cond func(runtimeRow) bool) runtimeRow {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r, ok := rowOf(base, name)
		if ok && cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last row %+v", what, within, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTimedPauseEndsByItself: a 3 s pause holds starts for 3 s while
// intake goes on, shows paused_until, and ends by itself with no burst.
func TestTimedPauseEndsByItself(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(lane("printer", "5/s", 20, "", ds.URL)))
	paused := time.Now()
	mustCall(t, in.admin, "POST", "/v1/downstreams/printer/pause", `{"for":"3s"}`)
	for i := range 5 {
		r := in.request(t, "shaper.jobs.printer", []byte(fmt.Sprint(i)), nil)
		if r.Status != "accepted" {
			t.Fatalf("paused lane refused intake: %+v", r)
		}
		// a timed pause has an end: the eta counts from it
		if r.Paused || !strings.Contains(r.Body, "eta_seconds") || r.ETASeconds < 2 {
			t.Errorf("reply %d during a 3 s pause: %s; want an eta after the pause's end", i, r.Body)
		}
	}
	if r, _ := rowOf(in.admin, "printer"); !r.Paused || r.PausedUntil == nil {
		t.Errorf("row while paused: %+v", r)
	}
	hits := ds.waitHits(t, 5, 10*time.Second)
	if first := hits[0].at.Sub(paused); first < 2900*time.Millisecond || first > 4500*time.Millisecond {
		t.Errorf("first start %s after a 3 s pause", first)
	}
	if span := hits[4].at.Sub(hits[0].at); span < 600*time.Millisecond {
		t.Errorf("5 starts within %s after the pause ended: a burst (5/s spaces them 200 ms)", span)
	}
	eventually(t, in.admin, "printer", 2*time.Second, "paused_until gone after the pause", func(r runtimeRow) bool {
		return !r.Paused && r.PausedUntil == nil
	})
	for _, tc := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"POST", "/v1/downstreams/printer/pause", `{"for":"1m","until":"2030-01-01T00:00:00Z"}`, 400, "for, until"},
		{"POST", "/v1/downstreams/printer/pause", `{"forr":"1m"}`, 400, "forr: unknown field"},
		{"POST", "/v1/downstreams/printer/pause", `{"until":"soon"}`, 400, "until:"},
		{"POST", "/v1/downstreams/nope/pause", `{"for":"1m"}`, 404, `no downstream named \"nope\"`},
		{"PATCH", "/v1/downstreams/printer", `{"rate":"fast"}`, 400, "rate:"},
		{"PATCH", "/v1/downstreams/printer", `{"capacity":0}`, 400, "capacity: must be 1..1000000"},
		{"PATCH", "/v1/downstreams/nope", `{"rate":"1/s"}`, 404, "nope"},
		{"DELETE", "/v1/downstreams/nope/override", ``, 404, "nope"},
	} {
		if status, body := adminCall(t, in.admin, tc.method, tc.path, tc.body); status != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s %s: %d %s, want %d with %s", tc.method, tc.path, tc.body, status, body, tc.status, tc.want)
		}
	}
}

// TestMaintenanceWindowHoldsStarts: a window a few seconds ahead holds
// starts for its length, intake goes on, and it shows in /v1/downstreams
// and shaper_maintenance.
func TestMaintenanceWindowHoldsStarts(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	begin := time.Now().UTC().Add(3 * time.Second).Truncate(time.Second)
	end := begin.Add(3 * time.Second)
	window := fmt.Sprintf("    maintenance: [\"daily %s 3s UTC\"]\n", begin.Format("15:04:05"))
	in := startDaemon(t, srv, baseConfig(lane("printer", "4/s", 100, window, ds.URL)))
	if r, _ := rowOf(in.admin, "printer"); r.Maintenance == nil || !r.Maintenance.Start.Equal(begin) || r.Maintenance.Active {
		t.Fatalf("next window before it: %+v", r.Maintenance)
	}
	stop := make(chan struct{})
	sent := make(chan int)
	go func() { // a job every 100 ms until stopped: intake through the window
		n := 0
		for {
			select {
			case <-stop:
				sent <- n
				return
			case <-time.After(100 * time.Millisecond):
			}
			if err := in.nc.Publish("shaper.jobs.printer", []byte("x")); err == nil {
				n++
			}
		}
	}()
	time.Sleep(time.Until(begin.Add(1500 * time.Millisecond)))
	r, _ := rowOf(in.admin, "printer")
	if r.Maintenance == nil || !r.Maintenance.Active {
		t.Errorf("in the window: %+v", r.Maintenance)
	}
	if m := in.metric(t, `shaper_maintenance{downstream="printer"}`); m != 1 {
		t.Errorf("shaper_maintenance in the window = %v", m)
	}
	time.Sleep(time.Until(end.Add(1500 * time.Millisecond)))
	close(stop)
	<-sent
	var inside, after int
	for _, h := range ds.snapshot() {
		switch {
		case !h.at.Before(begin.Add(50*time.Millisecond)) && h.at.Before(end):
			inside++
		case !h.at.Before(end):
			after++
		}
	}
	if inside != 0 || after == 0 {
		t.Errorf("starts inside the window %d (want 0), after it %d (want some)", inside, after)
	}
	if m := in.metric(t, `shaper_maintenance{downstream="printer"}`); m != 0 {
		t.Errorf("shaper_maintenance after the window = %v", m)
	}
}

// gapsAfter returns the gaps between the starts ds saw after t.
func gapsAfter(ds *downstream, t time.Time) []time.Duration {
	var last time.Time
	var gaps []time.Duration
	for _, h := range ds.snapshot() {
		if h.at.Before(t) {
			continue
		}
		if !last.IsZero() {
			gaps = append(gaps, h.at.Sub(last))
		}
		last = h.at
	}
	return gaps
}

// TestOverrideRate: PATCH rate 2/s → 20/s shows in the delivery gaps
// within a second; DELETE brings the file's rate back.
func TestOverrideRate(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(lane("printer", "2/s", 200, "", ds.URL)))
	for i := range 60 {
		if r := in.request(t, "shaper.jobs.printer", []byte(fmt.Sprint(i)), nil); r.Status != "accepted" {
			t.Fatalf("job %d: %+v", i, r)
		}
	}
	ds.waitHits(t, 2, 5*time.Second)
	mustCall(t, in.admin, "PATCH", "/v1/downstreams/printer", `{"rate":"20/s"}`)
	changed := time.Now()
	time.Sleep(2 * time.Second)
	gaps := gapsAfter(ds, changed.Add(time.Second))
	if len(gaps) < 10 {
		t.Fatalf("only %d starts in the second after 20/s: %v", len(gaps)+1, gaps)
	}
	for _, g := range gaps {
		if g > 150*time.Millisecond {
			t.Errorf("gap %s at 20/s", g)
		}
	}
	r, _ := rowOf(in.admin, "printer")
	if r.Rate != 20 || r.Override == nil || r.Override.Rate != 20 {
		t.Errorf("row with the override: %+v", r)
	}
	mustCall(t, in.admin, "DELETE", "/v1/downstreams/printer/override", "")
	back := time.Now()
	time.Sleep(2500 * time.Millisecond)
	gaps = gapsAfter(ds, back.Add(600*time.Millisecond))
	for _, g := range gaps {
		if g < 400*time.Millisecond {
			t.Errorf("gap %s after the override is gone: the file's 2/s should space starts 500 ms", g)
		}
	}
	if r, _ := rowOf(in.admin, "printer"); r.Rate != 2 || r.Override != nil {
		t.Errorf("row after DELETE: %+v", r)
	}
}

// jetstreamLane is a downstream on the jetstream backend.
func jetstreamLane(name, rate, url string) string {
	return fmt.Sprintf(`
  %s:
    rate: %s
    queue: { capacity: 100, backend: jetstream }
    sink: { http: { url: %q, timeout: 2s } }
`, name, rate, url)
}

// TestRuntimeSharedBetweenInstances: on a jetstream downstream, a pause and
// an override made through one instance are in force on the other.
func TestRuntimeSharedBetweenInstances(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	conf := baseConfig(jetstreamLane("printer", "2/s", ds.URL))
	a := startDaemon(t, srv, conf)
	b := startDaemon(t, srv, conf)
	mustCall(t, a.admin, "POST", "/v1/downstreams/printer/pause", `{"for":"1h"}`)
	mustCall(t, a.admin, "PATCH", "/v1/downstreams/printer", `{"rate":"7/s","capacity":50}`)
	r := eventually(t, b.admin, "printer", 5*time.Second, "the other instance follows", func(r runtimeRow) bool {
		return r.Paused && r.PausedUntil != nil && r.Rate == 7 && r.Capacity == 50
	})
	if r.Override == nil || r.Override.Rate != 7 || r.Override.Capacity != 50 {
		t.Errorf("override on the other instance: %+v", r.Override)
	}
	for i := range 3 {
		if rep := b.request(t, "shaper.jobs.printer", []byte(fmt.Sprint(i)), nil); rep.Status != "accepted" {
			t.Fatalf("job %d: %+v", i, rep)
		}
	}
	time.Sleep(time.Second)
	if n := len(ds.snapshot()); n != 0 {
		t.Errorf("%d starts while paused through the other instance", n)
	}
	mustCall(t, b.admin, "POST", "/v1/downstreams/printer/resume", "")
	mustCall(t, b.admin, "DELETE", "/v1/downstreams/printer/override", "")
	eventually(t, a.admin, "printer", 5*time.Second, "resume and unset reach the first instance", func(r runtimeRow) bool {
		return !r.Paused && r.Override == nil && r.Rate == 2
	})
	ds.waitHits(t, 3, 10*time.Second)
}

// TestRuntimeSurvivesKillNine: on a jetstream downstream a 1 h pause and a
// rate override are still in force after kill -9 and a restart.
func TestRuntimeSurvivesKillNine(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	conf := fmt.Sprintf(`
nats: { url: %q }
admin: { listen: "%%ADMIN%%" }
shutdown_grace: 2s
downstreams:`, srv.ClientURL()) + jetstreamLane("printer", "2/s", ds.URL)
	p := startShaperd(t, conf)
	mustCall(t, p.admin, "POST", "/v1/downstreams/printer/pause", `{"for":"1h"}`)
	mustCall(t, p.admin, "PATCH", "/v1/downstreams/printer", `{"rate":"20/s"}`)
	p.kill(t)
	p = startShaperd(t, conf)
	r, ok := rowOf(p.admin, "printer")
	if !ok || !r.Paused || r.PausedUntil == nil || time.Until(*r.PausedUntil) < 50*time.Minute || r.Rate != 20 || r.Override == nil {
		t.Fatalf("after kill -9 and restart: %+v", r)
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for i := range 3 {
		if _, err := nc.Request("shaper.jobs.printer", []byte(fmt.Sprint(i)), 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second)
	if n := len(ds.snapshot()); n != 0 {
		t.Errorf("%d starts during a 1 h pause kept across kill -9", n)
	}
	mustCall(t, p.admin, "POST", "/v1/downstreams/printer/resume", "")
	hits := ds.waitHits(t, 3, 5*time.Second)
	if gap := hits[2].at.Sub(hits[1].at); gap > 200*time.Millisecond {
		t.Errorf("gap %s: the 20/s override was not kept", gap)
	}
}

// TestRuntimeChangeRefusedWhileNATSDown: a change asked while NATS is down
// is answered 503 "nothing changed", and stays unmade when NATS is back:
// the client's reconnect buffer must not carry it to the bucket later.
func TestRuntimeChangeRefusedWhileNATSDown(t *testing.T) {
	t.Parallel()
	opts := natsOptions(t)
	srv := natsserver.RunServer(&opts)
	opts.Port = srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(jetstreamLane("printer", "2/s", ds.URL)))
	mustCall(t, in.admin, "PATCH", "/v1/downstreams/printer", `{"capacity":50}`) // the bucket is there
	srv.Shutdown()
	srv.WaitForShutdown()
	waitReady(t, in.admin, http.StatusServiceUnavailable, 15*time.Second)
	if status, body := adminCall(t, in.admin, "PATCH", "/v1/downstreams/printer", `{"rate":"7/s"}`); status != http.StatusServiceUnavailable {
		t.Fatalf("PATCH while NATS is down: %d %s, want 503", status, body)
	}
	srv = natsserver.RunServer(&opts)
	waitReady(t, in.admin, http.StatusOK, 15*time.Second)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(context.Background(), "SHAPER_RATES_RUNTIME")
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		e, err := kv.Get(context.Background(), "printer")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(e.Value()), `"rate"`) {
			t.Fatalf("the refused change was kept after all: %s", e.Value())
		}
		if r, _ := rowOf(in.admin, "printer"); r.Rate != 2 {
			t.Fatalf("the refused change applies after all: %+v", r)
		}
	}
}

// waitReady waits up to within for base's /readyz to answer status.
func waitReady(t *testing.T, base string, status int, within time.Duration) {
	t.Helper()
	for end := time.Now().Add(within); ; time.Sleep(50 * time.Millisecond) {
		if got, _ := httpGet(base + "/readyz"); got == status {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("/readyz did not answer %d within %s", status, within)
		}
	}
}

// TestNoDownstreamsSaysHowToAddOne: with no downstreams the daemon says how
// to add one: in its config file and SIGHUP, or, started without a config
// file (there is nothing to reload), in a file given with -config.
func TestNoDownstreamsSaysHowToAddOne(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	for _, tc := range []struct {
		noFile bool
		want   string
	}{{false, "send SIGHUP"}, {true, "restart shaperd with -config FILE"}} {
		in, logs := startDaemonOpts(t, srv, baseConfig(), daemon.Options{NoConfigFile: tc.noFile})
		in.stop(t)
		if !strings.Contains(logs.String(), tc.want) {
			t.Errorf("no config file %v: the log does not say %q:\n%s", tc.noFile, tc.want, logs.String())
		}
	}
}
