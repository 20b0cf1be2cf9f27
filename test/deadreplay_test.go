package test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go/jetstream"
)

// deadEntry is one dead letter as GET .../dead lists it.
type deadEntry struct {
	Seq          uint64              `json:"seq"`
	JobID        string              `json:"job_id"`
	Reason       string              `json:"reason"`
	Error        string              `json:"error"`
	Attempts     int                 `json:"attempts"`
	Time         time.Time           `json:"time"`
	PayloadBytes int                 `json:"payload_bytes"`
	Payload      string              `json:"payload_base64"`
	Headers      map[string][]string `json:"headers"`
}

// call does one admin request with a body and returns status and body.
func (in *instance) call(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, in.admin+path, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// skipWithoutStore skips the test while the dead-letter store is the stub
// (queue/jetstream/dead.go answers "not implemented yet"): these tests run
// as soon as the store lands.
func skipWithoutStore(t *testing.T, in *instance, downstream string) {
	t.Helper()
	status, body := in.call(t, http.MethodGet, "/v1/downstreams/"+downstream+"/dead", "")
	if status == http.StatusServiceUnavailable && strings.Contains(body, "not implemented yet") {
		t.Skipf("the dead-letter store is still the stub (queue/jetstream/dead.go): %s", strings.Join(strings.Fields(body), " "))
	}
	if status != http.StatusOK {
		t.Fatalf("GET dead of %s: %d %s", downstream, status, body)
	}
}

// deadList returns the listed dead letters and the total.
func (in *instance) deadList(t *testing.T, downstream string) ([]deadEntry, int) {
	t.Helper()
	var doc struct {
		DeadLetters []deadEntry `json:"dead_letters"`
		Total       int         `json:"total"`
	}
	body := in.get(t, "/v1/downstreams/"+downstream+"/dead?limit=10000", http.StatusOK)
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("dead list %s: %v", body, err)
	}
	return doc.DeadLetters, doc.Total
}

// waitDead waits until downstream's store holds n dead letters.
func (in *instance) waitDead(t *testing.T, downstream string, n int) []deadEntry {
	t.Helper()
	var list []deadEntry
	waitFor(t, 15*time.Second, func() bool {
		var total int
		list, total = in.deadList(t, downstream)
		return total == n
	}, fmt.Sprintf("%d dead letters stored for %s", n, downstream))
	return list
}

// failingDownstream answers 500 until healed.
func failingDownstream(t *testing.T) (*downstream, *atomic.Bool) {
	ds := newDownstream(t)
	healed := &atomic.Bool{}
	ds.respond = func(int, *http.Request) (int, map[string]string) {
		if healed.Load() {
			return http.StatusOK, nil
		}
		return http.StatusInternalServerError, nil
	}
	return ds, healed
}

// deadRetry makes a failing job a dead letter after two quick tries (no
// breaker holds it).
const deadRetry = "    retry: { max_attempts: 2, initial_backoff: 10ms, max_backoff: 10ms }\n    breaker: { failures: 0 }\n    dead_letter: shaper.dead.printer\n"

// publishJobs sends n accepted jobs and returns their job ids.
func (in *instance) publishJobs(t *testing.T, n int, tag string) []string {
	t.Helper()
	var ids []string
	for i := range n {
		r := in.request(t, "shaper.jobs.printer", fmt.Appendf(nil, `{"%s":%d}`, tag, i), map[string]string{"Content-Type": "application/json"})
		if r.Status != "accepted" {
			t.Fatalf("job %d: %+v", i, r)
		}
		ids = append(ids, r.JobID)
	}
	return ids
}

// hitsAfter are the downstream's requests from index n on.
func hitsAfter(ds *downstream, n int) []hit { return ds.snapshot()[n:] }

// Five jobs fail for good and are stored; after the downstream heals a
// replay at 2/s delivers each once, at least 0.4 s apart, with its
// original Idempotency-Key, and empties the store. The lane's admission
// limit is used up by the five: the replays pass it, and are not charged.
func TestDeadReplayPaced(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds, healed := failingDownstream(t)
	in := startDaemon(t, srv, baseConfig(durableLane("printer", "10/s", 20,
		deadRetry+"    admission: { mode: token_bucket, rate: 1/h, burst: 5 }\n", ds.URL)))
	skipWithoutStore(t, in, "printer")
	ids := in.publishJobs(t, 5, "job")
	list := in.waitDead(t, "printer", 5)
	for _, e := range list {
		if e.Reason != "failed" || e.Attempts != 2 || !slices.Contains(ids, e.JobID) || e.PayloadBytes != len(`{"job":0}`) {
			t.Errorf("stored dead letter %+v, want failed after 2 attempts, one of %v", e, ids)
		}
	}
	var one deadEntry
	if err := json.Unmarshal([]byte(in.get(t, fmt.Sprintf("/v1/downstreams/printer/dead/%d", list[0].Seq), http.StatusOK)), &one); err != nil {
		t.Fatal(err)
	}
	payload, _ := base64.StdEncoding.DecodeString(one.Payload)
	if !strings.HasPrefix(string(payload), `{"job":`) || one.Headers["Content-Type"][0] != "application/json" {
		t.Errorf("dead letter %d: payload %q, headers %v", one.Seq, payload, one.Headers)
	}
	for name := range one.Headers {
		if strings.HasPrefix(strings.ToLower(name), "shaper-") {
			t.Errorf("shown headers include the daemon's %s", name)
		}
	}
	if r := in.request(t, "shaper.jobs.printer", []byte("live"), nil); r.Reason != "rate_limited" {
		t.Fatalf("live job with the limit used up: %+v, want rate_limited", r)
	}

	healed.Store(true)
	before := len(ds.snapshot())
	status, body := in.call(t, http.MethodPost, "/v1/downstreams/printer/dead/replay", `{"rate":"2/s"}`)
	if status != http.StatusAccepted || jsonText(t, body) != `{"replaying":5}` {
		t.Fatalf("POST replay: %d %s, want 202 {\"replaying\":5}", status, body)
	}
	ds.waitHits(t, before+5, 20*time.Second)
	replayed := hitsAfter(ds, before)
	var keys []string
	for i, h := range replayed {
		keys = append(keys, h.idem)
		if i > 0 && h.at.Sub(replayed[i-1].at) < 400*time.Millisecond {
			t.Errorf("replays %d and %d %v apart, want at least 0.4 s at 2/s", i, i+1, h.at.Sub(replayed[i-1].at))
		}
	}
	if !sameSet(keys, ids) {
		t.Errorf("replayed Idempotency-Keys %v, want the original job ids %v", keys, ids)
	}
	in.waitDead(t, "printer", 0)
	if v := in.metricReaches(t, `shaper_dead_letters_replayed_total{downstream="printer"}`, 5); v != 5 {
		t.Errorf("shaper_dead_letters_replayed_total = %v, want 5", v)
	}
	if v := in.metric(t, `shaper_jobs_rejected_total{downstream="printer",reason="rate_limited"}`); v != 1 {
		t.Errorf("rate_limited = %v, want 1 (the live probe; replays are never charged)", v)
	}
	time.Sleep(500 * time.Millisecond)
	if n := len(ds.snapshot()); n != before+5 {
		t.Errorf("%d deliveries after the replay, want %d: a dead letter was replayed twice", n, before+5)
	}
}

// Live jobs keep their pace during a replay: with live jobs waiting, the
// replay waits; the live backlog drains at the lane's rate and the
// replayed jobs come after it.
func TestDeadReplayLiveJobsFirst(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds, healed := failingDownstream(t)
	in := startDaemon(t, srv, baseConfig(durableLane("printer", "5/s", 20, deadRetry, ds.URL)))
	skipWithoutStore(t, in, "printer")
	dead := in.publishJobs(t, 3, "dead")
	in.waitDead(t, "printer", 3)
	healed.Store(true)
	before := len(ds.snapshot())
	_ = in.do(t, http.MethodPost, "/v1/downstreams/printer/pause", http.StatusOK)
	live := in.publishJobs(t, 8, "live")
	if status, body := in.call(t, http.MethodPost, "/v1/downstreams/printer/dead/replay", `{"rate":"5/s"}`); status != http.StatusAccepted {
		t.Fatalf("POST replay: %d %s", status, body)
	}
	time.Sleep(time.Second)
	if n := len(ds.snapshot()); n != before {
		t.Fatalf("%d deliveries while paused, want none", n-before)
	}
	_ = in.do(t, http.MethodPost, "/v1/downstreams/printer/resume", http.StatusOK)
	ds.waitHits(t, before+11, 20*time.Second)
	hits := hitsAfter(ds, before)
	var first, last []string
	for i, h := range hits[:11] {
		if i < 8 {
			first = append(first, h.idem)
		} else {
			last = append(last, h.idem)
		}
		if i > 0 && i < 8 && h.at.Sub(hits[i-1].at) < 150*time.Millisecond {
			t.Errorf("live jobs %d and %d %v apart, want ~200ms (5/s)", i, i+1, h.at.Sub(hits[i-1].at))
		}
	}
	if !sameSet(first, live) || !sameSet(last, dead) {
		t.Fatalf("delivered %v then %v; want the live jobs %v first, then the replays %v", first, last, live, dead)
	}
	if span := hits[7].at.Sub(hits[0].at); span > 7*200*time.Millisecond+time.Second {
		t.Errorf("8 live jobs took %v at 5/s: a replay delayed them", span)
	}
}

// A bad body is refused 400 naming the field; an unknown downstream or
// seq is 404.
func TestDeadReplayBadInput(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	in := startDaemon(t, srv, baseConfig(lane("printer", "10/s", 10, "    dead_letter: shaper.dead.printer\n", "http://127.0.0.1:1/")))
	for _, tt := range []struct{ body, want string }{
		{`{"rate":"fast"}`, `rate: \"fast\" is not a rate; write e.g. 2/s or 120/m`},
		{`{"limit":-1}`, `limit: must be a whole number from 1`},
		{`{"rate":"2/s","speed":1}`, `\"speed\": unknown field; valid fields: rate, limit, reason`},
		{`{"reason":"broken"}`, `reason: \"broken\" is not a dead-letter reason`},
	} {
		status, body := in.call(t, http.MethodPost, "/v1/downstreams/printer/dead/replay", tt.body)
		if status != http.StatusBadRequest || !strings.Contains(body, tt.want) {
			t.Errorf("POST replay %s: %d %s, want 400 with %s", tt.body, status, body, tt.want)
		}
	}
	for _, tt := range []struct{ method, path string }{
		{"GET", "/v1/downstreams/nope/dead"}, {"GET", "/v1/downstreams/nope/dead/1"},
		{"POST", "/v1/downstreams/nope/dead/replay"}, {"DELETE", "/v1/downstreams/nope/dead/1"},
		{"DELETE", "/v1/downstreams/nope/dead"},
	} {
		if status, body := in.call(t, tt.method, tt.path, ""); status != http.StatusNotFound || !strings.Contains(body, `no downstream named \"nope\"`) {
			t.Errorf("%s %s: %d %s, want 404 naming the downstream", tt.method, tt.path, status, body)
		}
	}
	t.Run("unknown seq", func(t *testing.T) {
		skipWithoutStore(t, in, "printer")
		for _, method := range []string{"GET", "DELETE"} {
			if status, body := in.call(t, method, "/v1/downstreams/printer/dead/999", ""); status != http.StatusNotFound {
				t.Errorf("%s dead/999: %d %s, want 404", method, status, body)
			}
		}
	})
}

// A replay survives a restart: the daemon stops mid-replay, another
// starts on the same NATS and replays the rest, each dead letter once.
func TestDeadReplaySurvivesRestart(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds, healed := failingDownstream(t)
	conf := baseConfig(durableLane("printer", "10/s", 20, deadRetry, ds.URL))
	in := startDaemon(t, srv, conf)
	skipWithoutStore(t, in, "printer")
	ids := in.publishJobs(t, 5, "job")
	in.waitDead(t, "printer", 5)
	healed.Store(true)
	before := len(ds.snapshot())
	if status, body := in.call(t, http.MethodPost, "/v1/downstreams/printer/dead/replay", `{"rate":"1/s"}`); status != http.StatusAccepted {
		t.Fatalf("POST replay: %d %s", status, body)
	}
	ds.waitHits(t, before+2, 10*time.Second)
	in.stop(t)
	mid := len(hitsAfter(ds, before))
	if mid >= 5 {
		t.Fatalf("%d replayed before the stop; the test needs the stop mid-replay", mid)
	}
	in2 := startDaemon(t, srv, conf)
	ds.waitHits(t, before+5, 20*time.Second)
	in2.waitDead(t, "printer", 0)
	time.Sleep(500 * time.Millisecond)
	var keys []string
	for _, h := range hitsAfter(ds, before) {
		keys = append(keys, h.idem)
	}
	if len(keys) != 5 || !sameSet(keys, ids) {
		t.Fatalf("replayed %v (%d before the restart), want each of %v once", keys, mid, ids)
	}
	js, _ := jetstream.New(in2.nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if kv, err := js.KeyValue(ctx, "SHAPER_REPLAY"); err == nil {
		if keys, err := kv.Keys(ctx); !errors.Is(err, jetstream.ErrNoKeysFound) {
			t.Errorf("replay plans left after the replay finished: %v %v", keys, err)
		}
	}
}

// Without JetStream there is nothing to replay from: 503, saying why.
func TestDeadReplayNoJetStream(t *testing.T) {
	t.Parallel()
	opts := natsserver.DefaultTestOptions
	opts.Port = -1
	srv := natsserver.RunServer(&opts)
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	in := startDaemon(t, srv, baseConfig(lane("printer", "10/s", 10, "", "http://127.0.0.1:1/")))
	status, body := in.call(t, http.MethodPost, "/v1/downstreams/printer/dead/replay", "")
	if strings.Contains(body, "not implemented yet") {
		t.Skipf("the dead-letter store is still the stub: %s", strings.Join(strings.Fields(body), " "))
	}
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "JetStream") {
		t.Fatalf("POST replay without JetStream: %d %s, want 503 naming JetStream", status, body)
	}
}

// sameSet reports whether a and b hold the same strings, each as often.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// jsonText is a JSON body without its indentation.
func jsonText(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %s", s)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
