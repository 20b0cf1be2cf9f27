package test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/cmd/shaperd/daemon"
	"github.com/shaperd/shaper/shaper/producer"
)

// bulkAnswer is a decoded bulk reply.
type bulkAnswer struct {
	Status      string  `json:"status"`
	Downstream  string  `json:"downstream"`
	Accepted    int     `json:"accepted"`
	Rejected    int     `json:"rejected"`
	FailedIndex *int    `json:"failed_index"`
	Reason      string  `json:"reason"`
	RetryAfter  int     `json:"retry_after_seconds"`
	Error       string  `json:"error"`
	Jobs        []jobIn `json:"jobs"`
	Header      nats.Header
}

// jobIn is one job's entry in a bulk reply.
type jobIn struct {
	Index int `json:"index"`
	reply
}

// bulkSend sends one bulk request and decodes the reply, checking that
// the headers agree with the body.
func (in *instance) bulkSend(t *testing.T, downstream, body string, hdr map[string]string) bulkAnswer {
	t.Helper()
	m := nats.NewMsg("shaper.bulk." + downstream)
	m.Data = []byte(body)
	for k, v := range hdr {
		m.Header.Set(k, v)
	}
	resp, err := in.nc.RequestMsg(m, 10*time.Second)
	if err != nil {
		t.Fatalf("bulk request: %v", err)
	}
	var a bulkAnswer
	if err := json.Unmarshal(resp.Data, &a); err != nil {
		t.Fatalf("bulk reply %q: %v", resp.Data, err)
	}
	a.Header = resp.Header
	if got := resp.Header.Get("Shaper-Status"); got != a.Status {
		t.Fatalf("Shaper-Status %q != body status %q", got, a.Status)
	}
	if a.Jobs != nil {
		if resp.Header.Get("Shaper-Accepted") != strconv.Itoa(a.Accepted) || resp.Header.Get("Shaper-Rejected") != strconv.Itoa(a.Rejected) {
			t.Fatalf("Shaper-Accepted/Rejected %q/%q != body %d/%d", resp.Header.Get("Shaper-Accepted"), resp.Header.Get("Shaper-Rejected"), a.Accepted, a.Rejected)
		}
		for i, j := range a.Jobs {
			if j.Index != i {
				t.Fatalf("jobs[%d] has index %d", i, j.Index)
			}
		}
	}
	return a
}

// verdicts is each job's status (accepted) or reason, in order.
func (a bulkAnswer) verdicts() string {
	out := make([]string, len(a.Jobs))
	for i, j := range a.Jobs {
		switch {
		case j.Duplicate:
			out[i] = "duplicate"
		case j.Status == "accepted":
			out[i] = "accepted"
		default:
			out[i] = j.Reason
		}
	}
	return strings.Join(out, " ")
}

// ndjson renders jobs as NDJSON: one {"data": …} line each.
func ndjson(data ...string) string {
	var b strings.Builder
	for _, d := range data {
		fmt.Fprintf(&b, "{\"data\": %s}\n", d)
	}
	return b.String()
}

// Each job of a bulk request is taken as if it had been sent alone, in
// order: a full queue refuses the ones past its capacity with a
// Retry-After, a bad job is refused alone naming its field, and the
// downstream receives every payload byte for byte (a JSON value exactly
// as written, base64 decoded). Both backends.
func TestBulkIntakeTakesEachJobAlone(t *testing.T) {
	for _, backend := range []string{"memory", "jetstream"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			srv := runNATS(t)
			ds := newDownstream(t)
			in := startDaemon(t, srv, baseConfig(fmt.Sprintf(`
  printer:
    rate: 2/s
    queue: { capacity: 4, backend: %s }
    sink:
      http: { url: %q, timeout: 2s }
`, backend, ds.URL)))
			body := `[
  {"data": {"a": 1,  "b": [true, null]}},
  {"data_base64": "AAEC/w=="},
  {"data": "x", "data_base64": "eA=="},
  {"data": "caf\u00e9"},
  {"data": 7, "headers": {"Shaper-Cost": "x"}},
  {"data": 8},
  {"data": 9}
]`
			a := in.bulkSend(t, "printer", body, nil)
			if got := a.verdicts(); got != "accepted accepted bad_request accepted bad_request accepted queue_full" {
				t.Fatalf("verdicts %q", got)
			}
			if a.Status != "partial" || a.Accepted != 4 || a.Rejected != 3 || a.Downstream != "printer" {
				t.Errorf("totals: %+v", a)
			}
			if e := a.Jobs[2].Error; !strings.Contains(e, "data") || !strings.Contains(e, "data_base64") {
				t.Errorf("job 2's error %q does not name the fields", e)
			}
			if e := a.Jobs[4].Error; !strings.Contains(e, "job 4") || !strings.Contains(e, "Shaper-Cost") {
				t.Errorf("job 4's error %q does not name the job and header", e)
			}
			if a.Jobs[6].RetryAfter < 1 {
				t.Errorf("queue_full without a Retry-After: %+v", a.Jobs[6])
			}
			for _, p := range []int{0, 1, 3, 5} {
				if j := a.Jobs[p]; j.JobID == "" || j.Position < 1 {
					t.Errorf("job %d: id %q position %d", p, j.JobID, j.Position)
				}
			}
			hits := ds.waitHits(t, 4, 10*time.Second)
			want := []string{`{"a": 1,  "b": [true, null]}`, "\x00\x01\x02\xff", `"caf\u00e9"`, "8"}
			for i, h := range hits {
				if h.body != want[i] {
					t.Errorf("downstream call %d: body %q, want %q", i, h.body, want[i])
				}
				if h.jobID != a.Jobs[[]int{0, 1, 3, 5}[i]].JobID {
					t.Errorf("downstream call %d: job id %q, want the reply's", i, h.jobID)
				}
			}
			if v := in.metric(t, `shaper_bulk_requests_total{downstream="printer",status="partial"}`); v != 1 {
				t.Errorf("shaper_bulk_requests_total{partial} = %v", v)
			}
			if v := in.metric(t, `shaper_jobs_rejected_total{downstream="printer",reason="bad_request"}`); v != 2 {
				t.Errorf("bad_request jobs counted %v, want 2", v)
			}
			if v := in.metric(t, `shaper_jobs_accepted_total{downstream="printer"}`); v != 4 {
				t.Errorf("accepted jobs counted %v, want 4", v)
			}
		})
	}
}

// All or nothing: one job over its key's admission limit refuses the
// whole request, queues nothing and keeps no admission token; the reply
// names the job, its reason and Retry-After.
func TestBulkIntakeAtomicRefusesWhole(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(lane("printer", "1000/s", 100, `    admission: { mode: token_bucket, rate: 1/h, burst: 3 }
`, ds.URL)))
	in.do(t, "POST", "/v1/downstreams/printer/pause", 200)
	atomic := map[string]string{"Shaper-Bulk-Atomic": "true", "Shaper-Key": "acme"}
	a := in.bulkSend(t, "printer", ndjson("1", "2", "3", "4"), atomic)
	if a.Status != "rejected" || a.Accepted != 0 || a.Rejected != 4 || a.FailedIndex == nil || *a.FailedIndex != 3 || a.Reason != "rate_limited" || a.RetryAfter < 1 {
		t.Fatalf("reply: %+v", a)
	}
	if a.Header.Get("Shaper-Reason") != "rate_limited" || a.Header.Get("Retry-After") == "" {
		t.Errorf("headers: %v", a.Header)
	}
	if got := a.verdicts(); got != "rate_limited rate_limited rate_limited rate_limited" {
		t.Errorf("verdicts %q", got)
	}
	if !strings.Contains(a.Jobs[0].Error, "job 3") {
		t.Errorf("job 0's error %q does not name job 3", a.Jobs[0].Error)
	}
	if v := in.metric(t, `shaper_queue_depth{downstream="printer"}`); v != 0 {
		t.Fatalf("%v jobs queued after a refused all-or-nothing request", v)
	}
	// No token was kept: three jobs of the key fit, all or nothing.
	a = in.bulkSend(t, "printer", ndjson("1", "2", "3"), atomic)
	if a.Status != "accepted" || a.verdicts() != "accepted accepted accepted" {
		t.Fatalf("a request that fits: %+v", a)
	}
	// A bad job refuses an all-or-nothing request too.
	a = in.bulkSend(t, "printer", `[{"data": 1}, {"data": 2, "extra": 1}]`, map[string]string{"Shaper-Bulk-Atomic": "true"})
	if a.verdicts() != "bad_request bad_request" || *a.FailedIndex != 1 || !strings.Contains(a.Jobs[1].Error, "extra") {
		t.Fatalf("a bad job: %+v", a)
	}
}

// A request that cannot be read is refused whole, without jobs, saying
// what was wrong and what would be valid.
func TestBulkIntakeUnreadableRequests(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(lane("printer", "1000/s", 100, "", ds.URL))+`
ingress:
  max_payload: 512
  bulk: { max_jobs: 3, max_bytes: 1KiB }
`)
	for _, c := range []struct {
		name, downstream, body string
		hdr                    map[string]string
		reason, error          string
	}{
		{"not json", "printer", "hello", nil, "bad_request", "line 1"},
		{"no jobs", "printer", "[]", nil, "bad_request", "no jobs"},
		{"too many", "printer", ndjson("1", "2", "3", "4"), nil, "bad_request", "3"},
		{"too large", "printer", `[{"data": "` + strings.Repeat("x", 1100) + `"}]`, nil, "payload_too_large", "ingress.bulk.max_bytes"},
		{"unknown downstream", "nowhere", ndjson("1"), nil, "unknown_downstream", "not configured"},
		{"bad atomic", "printer", ndjson("1"), map[string]string{"Shaper-Bulk-Atomic": "yes"}, "bad_request", "write true"},
	} {
		a := in.bulkSend(t, c.downstream, c.body, c.hdr)
		if a.Status != "rejected" || a.Reason != c.reason || a.Jobs != nil || !strings.Contains(a.Error, c.error) {
			t.Errorf("%s: %+v, want %s naming %q", c.name, a, c.reason, c.error)
		}
	}
	if v := in.metric(t, `shaper_bulk_requests_total{downstream="printer",status="rejected"}`); v != 5 {
		t.Errorf("rejected requests counted %v, want 5", v)
	}
}

// Nats-Msg-Id dedupes within a request and across requests; the
// request's headers are every job's defaults and a job's own win; the
// downstream gets the headers a single job would pass on.
func TestBulkIntakeDedupeAndHeaders(t *testing.T) {
	for _, backend := range []string{"memory", "jetstream"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			srv := runNATS(t)
			ds := newDownstream(t)
			in := startDaemon(t, srv, baseConfig(fmt.Sprintf(`
  printer:
    rate: 1000/s
    queue: { capacity: 100, backend: %s }
    admission: { mode: token_bucket, rate: 1/h, burst: 1 }
    sink:
      http: { url: %q, timeout: 2s }
`, backend, ds.URL)))
			body := `[
  {"data": 1, "headers": {"Nats-Msg-Id": "o-1"}},
  {"data": 2, "headers": {"Nats-Msg-Id": "o-1"}},
  {"data": 3, "headers": {"Shaper-Key": "other", "content-type": "application/json"}},
  {"data": 4}
]`
			a := in.bulkSend(t, "printer", body, map[string]string{"Shaper-Key": "acme", "Content-Type": "text/plain"})
			if got := a.verdicts(); got != "accepted duplicate accepted rate_limited" {
				t.Fatalf("verdicts %q", got)
			}
			if a.Jobs[1].JobID != a.Jobs[0].JobID {
				t.Errorf("the duplicate's job id %q, want the first's %q", a.Jobs[1].JobID, a.Jobs[0].JobID)
			}
			again := in.bulkSend(t, "printer", `{"data": 1, "headers": {"Nats-Msg-Id": "o-1"}}`, nil)
			if again.verdicts() != "duplicate" || again.Jobs[0].JobID != a.Jobs[0].JobID {
				t.Errorf("a later request with the id: %+v", again)
			}
			hits := ds.waitHits(t, 2, 10*time.Second)
			types := map[string]string{}
			for _, h := range hits {
				types[h.body] = h.header.Get("Content-Type")
			}
			if types["1"] != "text/plain" || types["3"] != "application/json" {
				t.Errorf("Content-Type by payload %v, want 1→text/plain (the request's) and 3→application/json (the job's)", types)
			}
		})
	}
}

// A bulk request sent as a plain publish: each rejected job is counted
// and dead-lettered as a single one would be.
func TestBulkIntakePlainPublishDeadLetters(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(lane("printer", "1000/s", 1, "", ds.URL)))
	in.do(t, "POST", "/v1/downstreams/printer/pause", 200)
	dead := subscribeDead(t, in.nc, "shaper.dead.printer")
	if err := in.nc.Publish("shaper.bulk.printer", []byte(ndjson("1", "2", `"three"`))); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for range 2 {
		m := recvMsg(t, dead, 10*time.Second)
		got[string(m.Data)] = m.Header.Get("Shaper-Reason")
	}
	if got["2"] != "queue_full" || got[`"three"`] != "queue_full" {
		t.Errorf("dead letters %v, want 2 and \"three\" as queue_full", got)
	}
	in.metricReaches(t, `shaper_jobs_rejected_total{downstream="printer",reason="queue_full"}`, 2)
	in.metricReaches(t, `shaper_bulk_requests_total{downstream="printer",status="partial"}`, 1)
}

// The producer package against the daemon: SubmitBulk's typed results,
// and SubmitBulkRetry sending again only the jobs refused with a
// Retry-After, once it has passed, until all are in.
func TestBulkIntakeProducer(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(lane("printer", "1000/s", 100, `    admission: { mode: token_bucket, rate: 2/s, burst: 2 }
`, ds.URL)))
	jobs := []producer.BulkJob{
		producer.JSONJob([]byte(`{"n": 1}`)), producer.BytesJob([]byte{0, 1, 2}),
		producer.JSONJob([]byte(`3`)), producer.JSONJob([]byte(`4`), producer.Key("other")),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := producer.SubmitBulk(ctx, in.nc, "printer", jobs, producer.Key("acme"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != producer.BulkPartial || res.Accepted != 3 || res.Rejected != 1 || res.Jobs[2].Reason != "rate_limited" || res.Jobs[2].RetryAfter <= 0 {
		t.Fatalf("SubmitBulk: %+v", res)
	}
	// Key acme has no token left: two of these three wait for theirs.
	more := []producer.BulkJob{producer.JSONJob([]byte(`5`)), producer.JSONJob([]byte(`6`)), producer.JSONJob([]byte(`7`))}
	var retries atomic.Int32
	res, err = producer.SubmitBulkRetry(ctx, in.nc, "printer", more, producer.Key("acme"),
		producer.OnRetry(func(producer.Retry) { retries.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != producer.BulkAccepted || res.Accepted != 3 || retries.Load() == 0 {
		t.Fatalf("SubmitBulkRetry: %+v after %d retries", res, retries.Load())
	}
	hits := ds.waitHits(t, 6, 10*time.Second)
	bodies := map[string]bool{}
	for _, h := range hits {
		bodies[h.body] = true
	}
	for _, want := range []string{`{"n": 1}`, "\x00\x01\x02", "4", "5", "6", "7"} {
		if !bodies[want] {
			t.Errorf("the downstream did not get %q (got %v)", want, bodies)
		}
	}
}

// All or nothing on jetstream: a request the stream cannot hold whole is
// refused queue_full and stores nothing; one over the server's atomic
// batch limit is refused bad_request naming it; a job whose Nats-Msg-Id
// the store holds is answered as a duplicate and the rest are stored.
func TestBulkIntakeAtomicOnJetStream(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(fmt.Sprintf(`
  printer:
    rate: 1/h
    queue: { capacity: 1001, backend: jetstream }
    sink:
      http: { url: %q, timeout: 2s }
`, ds.URL))+`
ingress:
  bulk: { max_jobs: 2000 }
`)
	atomic := map[string]string{"Shaper-Bulk-Atomic": "true"}
	jobs := func(from, n int) string {
		data := make([]string, n)
		for i := range data {
			data[i] = strconv.Itoa(from + i)
		}
		return ndjson(data...)
	}
	a := in.bulkSend(t, "printer", jobs(0, 1001), atomic)
	if a.Status != "rejected" || a.Jobs[0].Reason != "bad_request" || !strings.Contains(a.Jobs[0].Error, "at most 1000") {
		t.Fatalf("1001 jobs all or nothing: %s %+v", a.Status, a.Jobs[0])
	}
	a = in.bulkSend(t, "printer", `[{"data": 1, "headers": {"Nats-Msg-Id": "o-1"}}, {"data": 2}]`, atomic)
	if a.verdicts() != "accepted accepted" {
		t.Fatalf("a request that fits: %s", a.verdicts())
	}
	a = in.bulkSend(t, "printer", `[{"data": 1, "headers": {"Nats-Msg-Id": "o-1"}}, {"data": 3}]`, atomic)
	if a.verdicts() != "duplicate accepted" || a.Jobs[0].JobID == "" {
		t.Fatalf("a request with a stored Nats-Msg-Id: %s %+v", a.verdicts(), a.Jobs[0])
	}
	// 3 stored (one may have started): 1000 more do not fit the 1001.
	a = in.bulkSend(t, "printer", jobs(10, 1000), atomic)
	if a.Status != "rejected" || a.Jobs[0].Reason != "queue_full" || a.Jobs[0].RetryAfter < 1 {
		t.Fatalf("an all-or-nothing request the stream cannot hold: %s %+v", a.Status, a.Jobs[0])
	}
	if v := in.metric(t, `shaper_jobs_accepted_total{downstream="printer"}`); v != 3 {
		t.Errorf("accepted jobs counted %v, want 3", v)
	}
	if n := streamMsgs(t, in.nc, "printer"); n > 3 {
		t.Fatalf("%d messages in the stream, want at most the 3 accepted", n)
	}
}

// The embedded server's max_payload fits ingress.bulk.max_bytes, so a
// bulk request of several MiB reaches the daemon; a remote server whose
// max_payload is smaller is named in the start-up log. Each job of a
// request is still bounded by ingress.max_payload.
func TestBulkIntakeMaxPayload(t *testing.T) {
	t.Parallel()
	ds := newDownstream(t)
	addr := freeAddr(t)
	startShaperd(t, fmt.Sprintf(`
nats:
  embedded: { listen: %q, store_dir: %q }
admin: { listen: "%%ADMIN%%" }
ingress: { max_payload: 4KiB, bulk: { max_bytes: 4MiB, max_jobs: 2000 } }
downstreams:
  printer:
    rate: 1/h
    queue: { capacity: 10000, backend: memory }
    sink: { http: { url: %q } }
`, addr, t.TempDir(), ds.URL))
	nc, err := nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	in := &instance{nc: nc}
	big := `"` + strings.Repeat("x", 3000) + `"`
	data := make([]string, 1001)
	for i := range data {
		data[i] = big
	}
	data[1000] = `"` + strings.Repeat("y", 5000) + `"`   // over ingress.max_payload
	a := in.bulkSend(t, "printer", ndjson(data...), nil) // about 3 MiB
	if a.Accepted != 1000 || a.Jobs[1000].Reason != "payload_too_large" || !strings.Contains(a.Jobs[1000].Error, "ingress.max_payload") {
		t.Fatalf("a 3 MiB request: %d accepted, the last %+v", a.Accepted, a.Jobs[1000])
	}

	srv := runNATS(t) // a remote server: max_payload 1MiB
	_, logs := startDaemonOpts(t, srv, baseConfig(lane("printer", "1/s", 10, "", ds.URL)), daemon.Options{})
	if !strings.Contains(logs.String(), "max_payload is below ingress.bulk.max_bytes") {
		t.Errorf("no start-up line names the remote server's smaller max_payload:\n%s", logs.String())
	}
}
