package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

// TestLevelsInStatusAndMetrics: with priority levels, /v1/downstreams and
// /metrics show the queued jobs per level and the delayed jobs not yet due,
// and a delayed job moves to its level once due. On both backends (on
// jetstream the counts follow the drainer's fetch, within a moment).
func TestLevelsInStatusAndMetrics(t *testing.T) { onBothBackends(t, levelsInStatusAndMetrics) }

func levelsInStatusAndMetrics(t *testing.T, backend string) {
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(prioLaneOn(backend, "api", "20/s", 100, 3, ds.URL)))
	in.do(t, http.MethodPost, "/v1/downstreams/api/pause", http.StatusOK)
	sent := time.Now()
	for i, h := range []map[string]string{
		{"Shaper-Priority": "0"}, nil, nil, {"Shaper-Priority": "1"}, {"Shaper-Priority": "2"},
		{"Shaper-Priority": "0", "Shaper-Delay": "4s"}, {"Shaper-Delay": "1h"},
	} {
		if r := in.request(t, "shaper.jobs.api", []byte(fmt.Sprint(i)), h); r.Status != "accepted" {
			t.Fatalf("job %d (%v): %+v", i, h, r)
		}
	}
	check := func(levels []int, delayed int) {
		t.Helper()
		var wrong []string
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if wrong = countsWrong(t, in, levels, delayed); len(wrong) == 0 || time.Now().After(deadline) {
				break
			}
		}
		for _, w := range wrong {
			t.Error(w)
		}
	}
	check([]int{1, 1, 3}, 2)
	time.Sleep(time.Until(sent.Add(5 * time.Second))) // the 4 s delayed job is due; nothing starts while paused
	check([]int{2, 1, 3}, 1)
	if n := len(ds.snapshot()); n != 0 {
		t.Errorf("%d jobs started while paused", n)
	}
}

// countsWrong is what /v1/downstreams and /metrics show wrong of the
// levels and delayed jobs of downstream api (7 jobs in all).
func countsWrong(t *testing.T, in *instance, levels []int, delayed int) []string {
	t.Helper()
	var wrong []string
	var doc struct {
		Downstreams []struct {
			Depth   int
			Levels  []int
			Delayed *int
		}
	}
	if err := json.Unmarshal([]byte(in.get(t, "/v1/downstreams", http.StatusOK)), &doc); err != nil || len(doc.Downstreams) != 1 {
		t.Fatalf("/v1/downstreams: %v %+v", err, doc)
	}
	d := doc.Downstreams[0]
	if d.Depth != 7 || !slices.Equal(d.Levels, levels) || d.Delayed == nil || *d.Delayed != delayed {
		wrong = append(wrong, fmt.Sprintf("/v1/downstreams: depth %d levels %v delayed %v, want 7, %v, %d", d.Depth, d.Levels, d.Delayed, levels, delayed))
	}
	for p, n := range levels {
		if got := in.metric(t, fmt.Sprintf(`shaper_queue_level_depth{downstream="api",priority="%d"}`, p)); got != float64(n) {
			wrong = append(wrong, fmt.Sprintf("level %d: metric %g, want %d", p, got, n))
		}
	}
	if got := in.metric(t, `shaper_queue_delayed_jobs{downstream="api"}`); got != float64(delayed) {
		wrong = append(wrong, fmt.Sprintf("delayed jobs metric %g, want %d", got, delayed))
	}
	return wrong
}

// On jetstream every instance reads the levels and the delayed jobs from
// the streams: an instance that is not the drainer shows the same counts
// as the drainer, and the delayed jobs count all of them, not only those
// the drainer's window reached (at 1/s the window is one job).
func TestLevelsSameOnEveryInstance(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	conf := baseConfig(prioLaneOn("jetstream", "api", "1/s", 100, 3, ds.URL))
	in, other := startDaemon(t, srv, conf), startDaemon(t, srv, conf)
	in.do(t, http.MethodPost, "/v1/downstreams/api/pause", http.StatusOK)
	for i, h := range []map[string]string{
		{"Shaper-Priority": "0"}, nil, nil, {"Shaper-Priority": "1"}, {"Shaper-Priority": "2"},
		{"Shaper-Priority": "0", "Shaper-Delay": "1h"}, {"Shaper-Delay": "1h"},
	} {
		if r := in.request(t, "shaper.jobs.api", []byte(fmt.Sprint(i)), h); r.Status != "accepted" {
			t.Fatalf("job %d (%v): %+v", i, h, r)
		}
	}
	for name, at := range map[string]*instance{"first": in, "second": other} {
		var wrong []string
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if wrong = countsWrong(t, at, []int{1, 1, 3}, 2); len(wrong) == 0 || time.Now().After(deadline) {
				break
			}
		}
		for _, w := range wrong {
			t.Errorf("%s instance: %s", name, w)
		}
	}
}
