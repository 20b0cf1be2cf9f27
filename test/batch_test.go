package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// bulk is a bulk-import endpoint: it parses every call's body by its
// Content-Type and keeps the calls by path (the downstream's name).
type bulk struct {
	*httptest.Server
	mu     sync.Mutex
	calls  map[string][]bulkCall
	answer map[string]func(n int, c bulkCall) (status int, hdr map[string]string, body string) // n counts the path's calls from 1
}

// bulkCall is one call as the endpoint read it.
type bulkCall struct {
	at       time.Time
	header   http.Header
	ids      []string // Shaper-Job-Ids
	attempts []string // Shaper-Attempts
	payloads []string // the body's items, in order
	partIDs  []string // multipart: each part's Shaper-Job-Id
	err      error    // the body did not parse
}

func newBulk(t *testing.T) *bulk {
	b := &bulk{calls: map[string][]bulkCall{}, answer: map[string]func(int, bulkCall) (int, map[string]string, string){}}
	b.Server = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(b.Close)
	return b
}

func (b *bulk) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	c := bulkCall{at: time.Now(), header: r.Header.Clone(),
		ids: strings.Split(r.Header.Get("Shaper-Job-Ids"), ","), attempts: strings.Split(r.Header.Get("Shaper-Attempts"), ",")}
	c.payloads, c.partIDs, c.err = decodeCall(r.Header.Get("Content-Type"), body)
	name := strings.TrimPrefix(r.URL.Path, "/")
	b.mu.Lock()
	b.calls[name] = append(b.calls[name], c)
	n, answer := len(b.calls[name]), b.answer[name]
	b.mu.Unlock()
	status, out := http.StatusOK, ""
	if answer != nil {
		var hdr map[string]string
		status, hdr, out = answer(n, c)
		for k, v := range hdr {
			w.Header().Set(k, v)
		}
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, out)
}

// decodeCall parses a call's body as a downstream would: a JSON array,
// NDJSON lines, or multipart/mixed parts (with their job ids).
func decodeCall(ct string, body []byte) (payloads, partIDs []string, err error) {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return nil, nil, err
	}
	switch mt {
	case "application/json":
		var items []json.RawMessage
		if err := json.Unmarshal(body, &items); err != nil {
			return nil, nil, err
		}
		for _, it := range items {
			payloads = append(payloads, string(it))
		}
	case "application/x-ndjson":
		payloads = strings.Split(string(body), "\n")
	case "multipart/mixed":
		mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, nil, err
			}
			data, _ := io.ReadAll(p)
			payloads = append(payloads, string(data))
			partIDs = append(partIDs, p.Header.Get("Shaper-Job-Id"))
		}
	default:
		return nil, nil, fmt.Errorf("unexpected Content-Type %q", ct)
	}
	return payloads, partIDs, nil
}

func (b *bulk) callsOf(name string) []bulkCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]bulkCall(nil), b.calls[name]...)
}

// waitJobs waits until name's calls carried n jobs in all.
func (b *bulk) waitJobs(t *testing.T, name string, n int, within time.Duration) []bulkCall {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		calls, got := b.callsOf(name), 0
		for _, c := range calls {
			got += len(c.payloads)
		}
		if got >= n {
			return calls
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d jobs in %d calls, want %d within %s", name, got, len(calls), n, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkCall checks that c's headers match its body: Shaper-Batch-Size,
// the ids and attempts (and a multipart body's part ids) name as many
// jobs as the body carries, and the Idempotency-Key is the batch id.
func checkCall(t *testing.T, name string, i int, c bulkCall) {
	t.Helper()
	h := c.header
	size, _ := strconv.Atoi(h.Get("Shaper-Batch-Size"))
	switch {
	case c.err != nil:
		t.Errorf("%s call %d: body: %v", name, i, c.err)
	case h.Get("Shaper-Batch-Id") == "" || h.Get("Idempotency-Key") != h.Get("Shaper-Batch-Id"):
		t.Errorf("%s call %d: Shaper-Batch-Id %q, Idempotency-Key %q", name, i, h.Get("Shaper-Batch-Id"), h.Get("Idempotency-Key"))
	case size != len(c.payloads) || len(c.ids) != size || len(c.attempts) != size:
		t.Errorf("%s call %d: Shaper-Batch-Size %d, %d ids, %d attempts, %d items in the body", name, i, size, len(c.ids), len(c.attempts), len(c.payloads))
	case c.partIDs != nil && !slices.Equal(c.partIDs, c.ids):
		t.Errorf("%s call %d: part ids %v, Shaper-Job-Ids %v", name, i, c.partIDs, c.ids)
	}
}

// TestBulkDownstreams: downstreams with batch, on both backends. 45 jobs
// at 2 calls/s with max_jobs 10: calls of 1 to 10 jobs, ≥ 1/rate apart,
// headers matching bodies, every job once, its record naming its call.
// The answer's failures are each job's own; a 502 and a 503 with
// Retry-After send the whole call again; linger fills a call; each
// encoding reaches a downstream that parses it; a payload an encoding
// cannot carry is refused; a NATS sink gets one message per call.
func TestBulkDownstreams(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"memory", "jetstream"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			bulkDownstreams(t, backend)
		})
	}
}

func bulkDownstreams(t *testing.T, backend string) {
	srv := runNATS(t)
	bk := newBulk(t)
	lane := func(name, rate, batch string) string {
		return fmt.Sprintf(`
  %s:
    rate: %s
    queue: { capacity: 1000, backend: %s }
    retry: { max_attempts: 5, initial_backoff: 100ms, max_backoff: 200ms }
    batch: %s
    sink: { http: { url: %q, timeout: 5s } }
`, name, rate, backend, batch, bk.URL+"/"+name)
	}
	cfg := baseConfig(
		lane("erp", "2/s", "{ max_jobs: 10 }"),
		lane("nd", "20/s", "{ max_jobs: 5, encoding: ndjson }"),
		lane("mp", "20/s", "{ max_jobs: 5, encoding: multipart }"),
		lane("fail", "5/s", "{ max_jobs: 10 }"),
		lane("gw", "5/s", "{ max_jobs: 10 }"),
		lane("lg", "2/s", "{ max_jobs: 10, linger: 600ms }"),
		fmt.Sprintf(`
  bus:
    rate: 20/s
    queue: { capacity: 100, backend: %s }
    batch: { max_jobs: 5 }
    sink: { nats: { subject: out.bus } }
`, backend))
	in := startDaemon(t, srv, cfg)
	send := func(t *testing.T, name, payload string, hdr map[string]string) reply {
		t.Helper()
		r := in.request(t, "shaper.jobs."+name, []byte(payload), hdr)
		if r.Status != "accepted" {
			t.Fatalf("%s job %q: %+v", name, payload, r)
		}
		return r
	}
	// paused runs send while name is paused, so that its jobs wait for
	// one call. On jetstream the drainer fetches them in the background:
	// the pause lasts until it holds them (it fetches in milliseconds;
	// 500 ms is room for a loaded machine).
	paused := func(name string, send func()) {
		in.do(t, "POST", "/v1/downstreams/"+name+"/pause", 200)
		send()
		if backend == "jetstream" {
			time.Sleep(500 * time.Millisecond)
		}
		in.do(t, "POST", "/v1/downstreams/"+name+"/resume", 200)
	}

	t.Run("paced calls", func(t *testing.T) { bulkPaced(t, in, bk, send) })
	t.Run("answers", func(t *testing.T) { bulkAnswers(t, in, bk, send) })
	t.Run("whole call again", func(t *testing.T) { bulkWholeCall(t, in, bk, send, paused) })
	t.Run("linger", func(t *testing.T) {
		for i := range 6 {
			send(t, "lg", fmt.Sprintf(`{"n":%d}`, i), nil)
			time.Sleep(50 * time.Millisecond)
		}
		calls := bk.waitJobs(t, "lg", 6, 10*time.Second)
		// 6 jobs 50 ms apart arrive within the 600 ms linger of the
		// first: one call (5 on a machine too slow to send them in time).
		if n := len(calls[0].payloads); n < 5 {
			t.Errorf("the first call carried %d jobs; want the 6 sent within its linger", n)
		}
	})
	t.Run("encodings", func(t *testing.T) {
		paused("nd", func() {
			for i := range 5 {
				send(t, "nd", fmt.Sprintf("line %d\t{x}", i), nil)
			}
		})
		paused("mp", func() {
			for i := range 5 {
				send(t, "mp", fmt.Sprintf("\x00bin\r\n%d", i), map[string]string{"Content-Type": "application/octet-stream"})
			}
		})
		for _, c := range []struct{ name, want string }{
			{"nd", "line 0\t{x}|line 1\t{x}|line 2\t{x}|line 3\t{x}|line 4\t{x}"},
			{"mp", "\x00bin\r\n0|\x00bin\r\n1|\x00bin\r\n2|\x00bin\r\n3|\x00bin\r\n4"},
		} {
			calls := bk.waitJobs(t, c.name, 5, 10*time.Second)
			checkCall(t, c.name, 0, calls[0])
			if got := strings.Join(calls[0].payloads, "|"); len(calls) != 1 || got != c.want {
				t.Errorf("%s: %d calls, the first carrying %q; want one carrying %q", c.name, len(calls), got, c.want)
			}
		}
	})
	t.Run("refused", func(t *testing.T) {
		for _, c := range []struct{ name, payload, names string }{
			{"erp", "not json", "json_array"},
			{"nd", "two\nlines", "ndjson"},
		} {
			r := in.request(t, "shaper.jobs."+c.name, []byte(c.payload), nil)
			if r.Status != "rejected" || r.Reason != "bad_request" || !strings.Contains(r.Error, c.names) {
				t.Errorf("%s: %q answered %+v; want bad_request naming %s", c.name, c.payload, r, c.names)
			}
		}
	})
	t.Run("nats sink", func(t *testing.T) {
		sub, err := in.nc.SubscribeSync("out.bus")
		if err != nil {
			t.Fatal(err)
		}
		if err := in.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		paused("bus", func() {
			for i := range 5 {
				send(t, "bus", fmt.Sprintf(`{"n":%d}`, i), nil)
			}
		})
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var items []json.RawMessage
		if err := json.Unmarshal(m.Data, &items); err != nil || len(items) != 5 || m.Header.Get("Shaper-Batch-Size") != "5" ||
			len(strings.Split(m.Header.Get("Shaper-Job-Ids"), ",")) != 5 {
			t.Errorf("message %q (%v), headers %v; want one JSON array of the 5 jobs", m.Data, err, m.Header)
		}
		if m, err := sub.NextMsg(500 * time.Millisecond); err == nil {
			t.Errorf("a second message %q; want one per call", m.Data)
		}
	})
}

// bulkPaced sends 45 jobs to erp (2 calls/s, max_jobs 10).
func bulkPaced(t *testing.T, in *instance, bk *bulk, send func(*testing.T, string, string, map[string]string) reply) {
	jobIDs := map[string]string{} // payload → job id
	for i := range 45 {
		p := fmt.Sprintf(`{"order":%d}`, i)
		jobIDs[p] = send(t, "erp", p, nil).JobID
	}
	calls := bk.waitJobs(t, "erp", 45, 20*time.Second)
	seen := map[string]int{}
	for i, c := range calls {
		checkCall(t, "erp", i, c)
		if n := len(c.payloads); n < 1 || n > 10 {
			t.Errorf("call %d carried %d jobs; want 1..10", i, n)
		}
		for j, p := range c.payloads {
			seen[p]++
			if j < len(c.ids) && c.ids[j] != jobIDs[p] {
				t.Errorf("call %d item %d: %s names job %s, it is job %s", i, j, p, c.ids[j], jobIDs[p])
			}
		}
		// 2 calls/s: 500 ms apart at the start, less the scheduler's
		// catch-up (20 ms) and the arrival's own delay, which on a busy
		// machine can make one gap seem shorter by tens of ms (the
		// contract bounds starts per window, not each gap).
		if i > 0 && c.at.Sub(calls[i-1].at) < 400*time.Millisecond {
			t.Errorf("call %d started %s after the one before; want ≥ 1/rate", i, c.at.Sub(calls[i-1].at))
		}
	}
	for p := range jobIDs {
		if seen[p] != 1 {
			t.Errorf("job %s arrived %d times; want once", p, seen[p])
		}
	}
	// The last job's record names its call.
	last := calls[len(calls)-1]
	id := last.ids[len(last.ids)-1]
	var rec struct {
		State   string `json:"state"`
		BatchID string `json:"batch_id"`
	}
	deadline := time.Now().Add(5 * time.Second)
	for rec.State != "succeeded" && time.Now().Before(deadline) {
		m, err := in.nc.Request("shaper.status.erp."+id, nil, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal(m.Data, &rec)
		time.Sleep(20 * time.Millisecond)
	}
	if rec.State != "succeeded" || rec.BatchID != last.header.Get("Shaper-Batch-Id") {
		t.Errorf("job %s's record: %+v; want succeeded with batch_id %s", id, rec, last.header.Get("Shaper-Batch-Id"))
	}
	if got := in.metricReaches(t, `shaper_batches_total{downstream="erp",outcome="success"}`, float64(len(calls))); got != float64(len(calls)) {
		t.Errorf("shaper_batches_total success %v; want %d", got, len(calls))
	}
	if got := in.metric(t, `shaper_batch_jobs_sum{downstream="erp"}`); got != 45 {
		t.Errorf("shaper_batch_jobs_sum %v; want 45", got)
	}
}

// bulkAnswers: the answer names a job failed with retry false (dead-
// lettered alone) and one with retry true (retried alone).
func bulkAnswers(t *testing.T, in *instance, bk *bulk, send func(*testing.T, string, string, map[string]string) reply) {
	bk.mu.Lock()
	bk.answer["fail"] = func(_ int, c bulkCall) (int, map[string]string, string) {
		var failed []string
		for i, p := range c.payloads {
			switch {
			case p == `{"p":"bad"}`:
				failed = append(failed, fmt.Sprintf(`{"job_id":%q,"error":"bad sku","retry":false}`, c.ids[i]))
			case p == `{"p":"again"}` && c.attempts[i] == "1":
				failed = append(failed, fmt.Sprintf(`{"job_id":%q,"error":"locked"}`, c.ids[i]))
			}
		}
		return http.StatusOK, nil, `{"imported":1,"failed":[` + strings.Join(failed, ",") + `]}`
	}
	bk.mu.Unlock()
	dead, err := in.nc.SubscribeSync("shaper.dead.fail")
	if err != nil {
		t.Fatal(err)
	}
	if err := in.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, p := range []string{`{"p":"ok"}`, `{"p":"bad"}`, `{"p":"again"}`} {
		ids[p] = send(t, "fail", p, nil).JobID
	}
	bk.waitJobs(t, "fail", 4, 10*time.Second)
	time.Sleep(300 * time.Millisecond) // a wrong extra try would come by now
	calls := bk.callsOf("fail")
	tries := map[string][]string{}
	for i, c := range calls {
		checkCall(t, "fail", i, c)
		for j, p := range c.payloads {
			tries[p] = append(tries[p], c.attempts[j])
		}
	}
	if got := fmt.Sprint(tries[`{"p":"ok"}`], tries[`{"p":"bad"}`], tries[`{"p":"again"}`]); got != "[1] [1] [1 2]" {
		t.Errorf("attempts of ok, bad, again: %s; want [1] [1] [1 2]", got)
	}
	last := calls[len(calls)-1]
	if len(last.payloads) != 1 || last.payloads[0] != `{"p":"again"}` {
		t.Errorf("the last call carried %q; want the retried job alone", last.payloads)
	}
	m, err := dead.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("no dead letter: %v", err)
	}
	if m.Header.Get("Shaper-Job-Id") != ids[`{"p":"bad"}`] || !strings.Contains(m.Header.Get("Shaper-Error"), "bad sku") {
		t.Errorf("dead letter %q %v; want job bad's, with its error", m.Data, m.Header)
	}
	if m, err := dead.NextMsg(300 * time.Millisecond); err == nil {
		t.Errorf("a second dead letter %q %v; want bad's alone", m.Data, m.Header)
	}
}

// bulkWholeCall: a 502 retries every job of the call, a 503 with
// Retry-After pushes the whole call back.
func bulkWholeCall(t *testing.T, in *instance, bk *bulk, send func(*testing.T, string, string, map[string]string) reply, paused func(string, func())) {
	bk.mu.Lock()
	bk.answer["gw"] = func(n int, _ bulkCall) (int, map[string]string, string) {
		switch n {
		case 1:
			return http.StatusBadGateway, nil, "upstream down"
		case 2:
			return http.StatusServiceUnavailable, map[string]string{"Retry-After": "1"}, ""
		}
		return http.StatusOK, nil, ""
	}
	bk.mu.Unlock()
	paused("gw", func() {
		for i := range 3 {
			send(t, "gw", fmt.Sprintf(`{"n":%d}`, i), nil)
		}
	})
	calls := bk.waitJobs(t, "gw", 9, 15*time.Second)
	if len(calls) != 3 {
		t.Fatalf("%d calls; want 3 (502, 503, 200)", len(calls))
	}
	first := slices.Sorted(slices.Values(calls[0].ids)) // retries come back in the order their backoffs end
	for i, c := range calls {
		checkCall(t, "gw", i, c)
		if !slices.Equal(slices.Sorted(slices.Values(c.ids)), first) || strings.Join(c.attempts, ",") != strings.Repeat(strconv.Itoa(i+1)+",", 2)+strconv.Itoa(i+1) {
			t.Errorf("call %d: jobs %v attempts %v; want the first call's jobs %v, each at attempt %d", i, c.ids, c.attempts, calls[0].ids, i+1)
		}
	}
	if d := calls[2].at.Sub(calls[1].at); d < 950*time.Millisecond {
		t.Errorf("the call after the 503 came %s later; want ≥ its Retry-After (1 s)", d)
	}
	for o, want := range map[string]float64{"retry": 1, "pushback": 1, "success": 1} {
		if got := in.metricReaches(t, fmt.Sprintf(`shaper_batches_total{downstream="gw",outcome=%q}`, o), want); got != want {
			t.Errorf("shaper_batches_total{outcome=%q} %v; want %v", o, got, want)
		}
	}
}
