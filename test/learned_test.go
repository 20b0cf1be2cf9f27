package test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/cmd/shaperd/daemon"
)

// gcraDownstream answers 429 without Retry-After beyond rate per second
// (GCRA, burst 2), 200 within it.
func gcraDownstream(t *testing.T, rate float64) *downstream {
	ds := newDownstream(t)
	inc := time.Duration(float64(time.Second) / rate)
	var mu sync.Mutex
	var tat time.Time
	ds.respond = func(int, *http.Request) (int, map[string]string) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		tat = later(tat, now)
		if tat.Sub(now) > 2*inc {
			return http.StatusTooManyRequests, nil
		}
		tat = tat.Add(inc)
		return http.StatusOK, nil
	}
	return ds
}

// keptRate reads downstream's kept value from the rates bucket.
func keptRate(t *testing.T, in *instance, downstream string) (rate float64, at time.Time) {
	t.Helper()
	js, err := jetstream.New(in.nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, "SHAPER_RATES")
	if err != nil {
		t.Fatalf("rates bucket: %v", err)
	}
	e, err := kv.Get(ctx, downstream)
	if err != nil {
		t.Fatalf("kept rate of %s: %v", downstream, err)
	}
	var v struct {
		Rate float64   `json:"rate"`
		At   time.Time `json:"at"`
	}
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		t.Fatalf("kept rate %q: %v", e.Value(), err)
	}
	return v.Rate, v.At
}

// TestLearnedRateSurvivesRestart: an adaptive lane behind a 30/s
// downstream learns a rate well below its 100/s ceiling; the daemon keeps
// it in NATS KV, and a second daemon on the same NATS starts at it: its
// shaper_drain_rate_per_second right after start is the kept value, not
// the ceiling.
func TestLearnedRateSurvivesRestart(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := gcraDownstream(t, 30)
	cfg := baseConfig(lane("api", "100/s", 10000, `    rate_control: adaptive
    retry: { max_attempts: 20, initial_backoff: 100ms, max_backoff: 1s }
`, ds.URL))
	first := startDaemon(t, srv, cfg)
	const rateSeries = `shaper_drain_rate_per_second{downstream="api"}`
	if got := first.metric(t, rateSeries); got != 100 {
		t.Fatalf("first daemon starts at %v, want the ceiling 100 (nothing kept yet)", got)
	}
	for i := range 500 { // ~15 s of work at 30/s: the lane stays busy
		if err := first.nc.Publish("shaper.jobs.api", fmt.Appendf(nil, "%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	learned := first.rateBelow(t, rateSeries, 80, 20*time.Second)
	first.stop(t) // saves once more after the last answer
	t.Logf("learned %v", learned)
	kept, at := keptRate(t, first, "api")
	if kept >= 80 || kept <= 0 || time.Since(at) > time.Minute {
		t.Fatalf("kept %v at %v, want the learned rate (about %v), saved just now", kept, at, learned)
	}

	second := startDaemon(t, srv, cfg)
	if got := second.metric(t, rateSeries); got != kept {
		t.Errorf("second daemon starts at %v, want the kept %v (ceiling 100)", got, kept)
	}
	if got := second.metric(t, `shaper_drain_rate_configured_per_second{downstream="api"}`); got != 100 {
		t.Errorf("ceiling %v, want 100", got)
	}
}

// TestLearnedRateOnFailover: two daemons share a jetstream queue; the
// pinned drainer learns a rate behind a 30/s downstream and keeps it. When
// it stops, the standby reads the kept value as the queue hands it the
// jobs, before its first start, and drains from there, not from the
// ceiling.
func TestLearnedRateOnFailover(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := gcraDownstream(t, 30)
	cfg := strings.Replace(baseConfig(durableLane("api", "100/s", 10000, `    rate_control: adaptive
    retry: { max_attempts: 20, initial_backoff: 100ms, max_backoff: 1s }
`, ds.URL)), `nats: { url: "%NATS%" }`, `nats: { url: "%NATS%", jetstream: { pinned_ttl: 1s, ack_wait: 3s } }`, 1)
	var ins [2]*instance
	var logs [2]*capturedLog
	for i := range ins {
		logs[i] = &capturedLog{}
		ins[i], _ = startDaemonOpts(t, srv, cfg, daemon.Options{
			Logger: slog.New(slog.NewTextHandler(logs[i], &slog.HandlerOptions{Level: slog.LevelInfo}))})
	}
	for i := range 600 { // ~20 s of work at 30/s
		if err := ins[0].nc.Publish("shaper.jobs.api", fmt.Appendf(nil, "%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// 8 s: the standby reads the kept value at a takeover only after it
	// started nothing for 5 s (the lane's takeover gap), so it must have
	// been idle that long; a poll for the learned rate would end sooner.
	time.Sleep(8 * time.Second)
	active := -1
	for i, in := range ins {
		if in.metric(t, `shaper_jobs_started_total{downstream="api"}`) > 0 {
			if active >= 0 {
				t.Fatalf("both daemons drained the jetstream queue")
			}
			active = i
		}
	}
	if active < 0 {
		t.Fatal("no daemon drained in 8 s")
	}
	standby := ins[1-active]
	ins[active].stop(t)
	kept, _ := keptRate(t, standby, "api")
	if kept >= 80 {
		t.Fatalf("kept %v; the test needs a learned rate below 80", kept)
	}
	deadline := time.Now().Add(15 * time.Second)
	for standby.metric(t, `shaper_jobs_started_total{downstream="api"}`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the standby did not take over within 15 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("kept %v learned by daemon %d; the standby took over", kept, active)
	want := fmt.Sprintf(`msg="adaptive rate restored from the kept value" downstream=api rate=%v `, kept)
	if l := logs[1-active].String(); !strings.Contains(l, want) {
		t.Errorf("the standby's log lacks %s:\n%s", want, l)
	}
}

// rateBelow polls series until it is below limit, and fails when it is not
// within the given time: the adaptive rate behind a 30/s downstream falls
// below 80 within a few seconds of work.
func (in *instance) rateBelow(t *testing.T, series string, limit float64, within time.Duration) float64 {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := in.metric(t, series)
		if got < limit {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s behind a 30/s downstream %s is %v; the test needs a learned rate below %v", within, series, got, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
