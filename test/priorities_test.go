package test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// prioLane is a memory downstream with priority levels.
func prioLane(name, rate string, capacity, levels int, url string) string {
	return prioLaneOn("memory", name, rate, capacity, levels, url)
}

// prioLaneOn is a downstream with priority levels on backend.
func prioLaneOn(backend, name, rate string, capacity, levels int, url string) string {
	return laneQ(name, rate, fmt.Sprintf("{ capacity: %d, backend: %s, priorities: %d }", capacity, backend, levels), url)
}

// onBothBackends runs test as a parallel subtest per queue backend.
func onBothBackends(t *testing.T, test func(t *testing.T, backend string)) {
	t.Parallel()
	for _, backend := range []string{"memory", "jetstream"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			test(t, backend)
		})
	}
}

// TestPrioritiesUrgentFirst: 20 ordinary jobs, then 5 urgent ones. The
// urgent ones start one after another within two starts of their arrival,
// each level keeps FIFO order, and the replies' positions count only the
// jobs that start before each job. On both backends. At 5/s, so that a
// pause of the test between two urgent requests lets no ordinary job
// start between them unless it lasts an interval (200 ms): at 20/s a
// busy CI machine once let seven start between u1 and u2.
func TestPrioritiesUrgentFirst(t *testing.T) { onBothBackends(t, prioritiesUrgentFirst) }

func prioritiesUrgentFirst(t *testing.T, backend string) {
	srv := runNATS(t)
	ds := newDownstream(t)
	const rate = 5
	in := startDaemon(t, srv, baseConfig(prioLaneOn(backend, "api", fmt.Sprint(rate, "/s"), 100, 3, ds.URL)))
	for i := range 20 {
		r := in.request(t, "shaper.jobs.api", []byte(fmt.Sprint("o", i)), nil)
		if r.Status != "accepted" || r.Position < 1 || r.Position > i+1 {
			t.Fatalf("ordinary job %d: %+v, want accepted at position 1..%d", i, r, i+1)
		}
	}
	started := len(ds.snapshot())
	for i := range 5 {
		r := in.request(t, "shaper.jobs.api", []byte(fmt.Sprint("u", i)), map[string]string{"Shaper-Priority": "0"})
		if r.Status != "accepted" || r.Position < 1 || r.Position > i+1 {
			t.Fatalf("urgent job %d: %+v, want accepted at position 1..%d (only urgent jobs ahead)", i, r, i+1)
		}
		if r.ETASeconds > float64(i+2)/rate+0.05 {
			t.Errorf("urgent job %d: eta %.3f s, want at most %d intervals", i, r.ETASeconds, i+2)
		}
	}
	hits := ds.waitHits(t, 25, 20*time.Second)
	var order []string
	for _, h := range hits {
		order = append(order, h.body)
	}
	first := slices.Index(order, "u0")
	if first < 0 || first > started+2 {
		t.Fatalf("first urgent job started as number %d; %d had started when it arrived; order %v", first+1, started, order)
	}
	for i := range 5 {
		if order[first+i] != fmt.Sprint("u", i) {
			t.Fatalf("urgent jobs not consecutive and in order: %v", order)
		}
	}
	ordinary := slices.DeleteFunc(slices.Clone(order), func(s string) bool { return strings.HasPrefix(s, "u") })
	for i, b := range ordinary {
		if b != fmt.Sprint("o", i) {
			t.Fatalf("ordinary jobs out of FIFO order: %v", ordinary)
		}
	}
}

// TestDelayedJob: a job delayed 2 s starts no earlier than 2 s after it
// was sent, while a job sent after it without a delay starts at once; the
// reply names the instant (fractions of a second kept from a
// Shaper-Not-Before). On both backends.
func TestDelayedJob(t *testing.T) { onBothBackends(t, delayedJob) }

func delayedJob(t *testing.T, backend string) {
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(prioLaneOn(backend, "api", "20/s", 100, 1, ds.URL)))
	sent := time.Now()
	r := in.request(t, "shaper.jobs.api", []byte("late"), map[string]string{"Shaper-Delay": "2s"})
	nb, err := time.Parse(time.RFC3339Nano, r.NotBefore)
	if r.Status != "accepted" || err != nil || nb.Before(sent.Add(2*time.Second)) || r.ETASeconds < 1.9 {
		t.Fatalf("delayed job: %+v, want accepted with not_before ≥ 2 s ahead and eta ≥ 2 s", r)
	}
	at := time.Now().Add(1500 * time.Millisecond).Truncate(time.Millisecond).Add(123 * time.Microsecond)
	r = in.request(t, "shaper.jobs.api", []byte("at"), map[string]string{"Shaper-Not-Before": at.Format(time.RFC3339Nano)})
	if got, err := time.Parse(time.RFC3339Nano, r.NotBefore); r.Status != "accepted" || err != nil || !got.Equal(at) {
		t.Fatalf("not-before job: %+v, want not_before %s exactly", r, at.Format(time.RFC3339Nano))
	}
	r = in.request(t, "shaper.jobs.api", []byte("now"), nil)
	if r.Status != "accepted" || r.NotBefore != "" || r.ETASeconds > 0.2 {
		t.Fatalf("undelayed job behind a delayed one: %+v, want accepted at once, no not_before", r)
	}
	hits := ds.waitHits(t, 3, 10*time.Second)
	when := map[string]time.Time{}
	for _, h := range hits {
		when[h.body] = h.at
	}
	if d := when["now"].Sub(sent); d > time.Second {
		t.Errorf("undelayed job started %s after the first send, want at once", d)
	}
	if when["late"].Before(sent.Add(2 * time.Second)) {
		t.Errorf("delayed job started %s after it was sent, want ≥ 2 s", when["late"].Sub(sent))
	}
	if when["at"].Before(at) {
		t.Errorf("not-before job started %s before its instant", at.Sub(when["at"]))
	}
}

// TestDelayedDueTogetherArePaced: 500 jobs due at one instant start no
// earlier than it and at the drain rate, with no burst: over any 1 s
// window at most rate × 1.1 + 1 starts. On both backends.
func TestDelayedDueTogetherArePaced(t *testing.T) { onBothBackends(t, delayedDueTogetherArePaced) }

func delayedDueTogetherArePaced(t *testing.T, backend string) {
	const n, rate = 500, 100
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(prioLaneOn(backend, "api", fmt.Sprintf("%d/s", rate), 1000, 1, ds.URL)))
	due := time.Now().Add(1500 * time.Millisecond)
	for i := range n {
		m := natsMsg("shaper.jobs.api", fmt.Sprint(i), "Shaper-Not-Before", due.Format(time.RFC3339Nano))
		if err := in.nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := in.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	hits := ds.waitHits(t, n, 20*time.Second)
	if hits[0].at.Before(due) {
		t.Fatalf("first start %s before the instant", due.Sub(hits[0].at))
	}
	if queued := in.metric(t, `shaper_jobs_accepted_total{downstream="api"}`); queued != n {
		t.Fatalf("accepted %v, want %d", queued, n)
	}
	limit := rate*1.1 + 1
	for i := range hits {
		j := i
		for j < len(hits) && hits[j].at.Sub(hits[i].at) < time.Second {
			j++
		}
		if j-i > int(limit) {
			t.Fatalf("%d starts in the 1 s from start %d, want at most %.0f", j-i, i, limit)
		}
	}
	if took := hits[n-1].at.Sub(hits[0].at); took < time.Duration(n-1)*time.Second/rate*9/10 {
		t.Errorf("500 due jobs drained in %s, faster than the rate allows", took)
	}
}

// TestPrioritiesBadHeaders: bad priority and delay headers are refused as
// bad_request with a reason naming what is valid.
func TestPrioritiesBadHeaders(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(prioLane("api", "20/s", 100, 3, ds.URL)))
	past := time.Now().Add(-time.Hour).Format(time.RFC3339)
	cases := []struct {
		name string
		hdr  map[string]string
		want string // in the error; "" = accepted
	}{
		{"priority past the levels", map[string]string{"Shaper-Priority": "3"}, "0..2 are valid"},
		{"priority not a number", map[string]string{"Shaper-Priority": "high"}, "whole number 0..queue.priorities"},
		{"priority negative", map[string]string{"Shaper-Priority": "-1"}, "whole number 0..queue.priorities"},
		{"delay negative", map[string]string{"Shaper-Delay": "-1s"}, "Go duration of 0 or more"},
		{"delay garbage", map[string]string{"Shaper-Delay": "soon"}, "Go duration of 0 or more"},
		{"delay past max_delay", map[string]string{"Shaper-Delay": "25h"}, "queue.max_delay 24h"},
		{"both", map[string]string{"Shaper-Delay": "1s", "Shaper-Not-Before": past}, "both given"},
		{"not-before garbage", map[string]string{"Shaper-Not-Before": "tomorrow"}, "RFC 3339"},
		{"not-before past", map[string]string{"Shaper-Not-Before": past}, ""},
		{"delay zero", map[string]string{"Shaper-Delay": "0s", "Shaper-Priority": "2"}, ""},
	}
	for _, tc := range cases {
		r := in.request(t, "shaper.jobs.api", []byte(tc.name), tc.hdr)
		switch {
		case tc.want == "" && (r.Status != "accepted" || r.NotBefore != ""):
			t.Errorf("%s: %+v, want accepted without delay", tc.name, r)
		case tc.want != "" && (r.Reason != "bad_request" || !strings.Contains(r.Error, tc.want)):
			t.Errorf("%s: %+v, want bad_request naming %q", tc.name, r, tc.want)
		}
	}
}

// natsMsg is a message with a body and one header.
func natsMsg(subject, body, name, value string) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = []byte(body)
	m.Header.Set(name, value)
	return m
}
