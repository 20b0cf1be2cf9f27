package producer_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/shaper/producer"
)

// bulkFake is a fake shaperd's bulk intake on one subject: it keeps each
// request and answers it with answer(call, request), call counting from 0.
type bulkFake struct {
	mu     sync.Mutex
	reqs   []bulkRequest
	answer func(call int, r bulkRequest) *nats.Msg
}

// bulkRequest is a bulk request as the fake read it.
type bulkRequest struct {
	subject string
	header  nats.Header
	body    string
	jobs    []bulkJob
}

// bulkJob is one job object of a bulk request, decoded as shaperd would:
// data as the raw bytes written, or data_base64 decoded.
type bulkJob struct {
	Data       json.RawMessage   `json:"data"`
	DataBase64 *string           `json:"data_base64"`
	Headers    map[string]string `json:"headers"`
}

// payload is what the downstream would receive.
func (j bulkJob) payload() string {
	if j.DataBase64 != nil {
		b, _ := base64.StdEncoding.DecodeString(*j.DataBase64)
		return string(b)
	}
	return string(j.Data)
}

func startBulkFake(t *testing.T, nc *nats.Conn, subject string, answer func(int, bulkRequest) *nats.Msg) *bulkFake {
	t.Helper()
	f := &bulkFake{answer: answer}
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		r := bulkRequest{subject: m.Subject, header: m.Header, body: string(m.Data)}
		if err := json.Unmarshal(m.Data, &r.jobs); err != nil {
			t.Errorf("the body is not a JSON array of jobs: %v\n%s", err, m.Data)
		}
		f.mu.Lock()
		call := len(f.reqs)
		f.reqs = append(f.reqs, r)
		f.mu.Unlock()
		if reply := answer(call, r); reply != nil {
			reply.Subject = m.Reply
			_ = m.RespondMsg(reply)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *bulkFake) requests() []bulkRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]bulkRequest(nil), f.reqs...)
}

// accepted and rejected are single-job reply bodies, as shaperd writes them.
func accepted(jobID string, position int) map[string]any {
	return map[string]any{"status": "accepted", "downstream": "printer", "job_id": jobID, "position": position,
		"eta_seconds": float64(position) / 2}
}

func rejected(reason string, retryAfter int, text string) map[string]any {
	b := map[string]any{"status": "rejected", "reason": reason, "error": text}
	if retryAfter > 0 {
		b["retry_after_seconds"] = retryAfter
	}
	return b
}

// bulkReply is a bulk reply with the job answers given, in that order;
// each carries its index unless it has one already.
func bulkReply(answers ...map[string]any) *nats.Msg {
	acc := 0
	for i, a := range answers {
		if _, ok := a["index"]; !ok {
			a["index"] = i
		}
		if a["status"] == "accepted" {
			acc++
		}
	}
	status := "partial"
	switch acc {
	case len(answers):
		status = "accepted"
	case 0:
		status = "rejected"
	}
	m := nats.NewMsg("")
	m.Header.Set("Shaper-Status", status)
	m.Header.Set("Shaper-Accepted", strconv.Itoa(acc))
	m.Header.Set("Shaper-Rejected", strconv.Itoa(len(answers)-acc))
	m.Data, _ = json.Marshal(map[string]any{"status": status, "downstream": "printer",
		"accepted": acc, "rejected": len(answers) - acc, "jobs": answers})
	return m
}

// wholeRejection is the reply to a request that cannot be read at all.
func wholeRejection(reason string, retryAfter int, text string) *nats.Msg {
	m := nats.NewMsg("")
	m.Header.Set("Shaper-Status", "rejected")
	m.Header.Set("Shaper-Reason", reason)
	if retryAfter > 0 {
		m.Header.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	m.Data, _ = json.Marshal(rejected(reason, retryAfter, text))
	return m
}

// The body is a JSON array: a JSON job's data as written (spaces, escapes
// and all), other bytes as data_base64, each job's options as its
// "headers"; the request's options are the message's headers.
func TestSubmitBulkEncoding(t *testing.T) {
	nc := runNATS(t)
	f := startBulkFake(t, nc, "bulk.printer", func(_ int, r bulkRequest) *nats.Msg {
		answers := make([]map[string]any, len(r.jobs))
		for i := range r.jobs {
			answers[i] = accepted("j"+strconv.Itoa(i), i+1)
		}
		answers[2] = map[string]any{"status": "accepted", "downstream": "printer", "job_id": "j0", "duplicate": true}
		return bulkReply(answers...)
	})
	c, err := producer.New(nc, producer.BulkSubjectPrefix("bulk"), producer.KeyHeader("x-tenant"))
	if err != nil {
		t.Fatal(err)
	}
	doc := `{ "doc": 1,  "s": "a\u00e9 <&>" }`
	jobs := []producer.BulkJob{
		producer.JSONJob([]byte(doc)),
		producer.BytesJob([]byte{0, 1, 0xfe, 0xff}, producer.Key("globex"), producer.MsgID("o-17"),
			producer.Header("X-Trace", "t-1"), producer.Priority(0)),
		producer.JSONJob([]byte(`"text"`), producer.Delay(time.Minute)),
	}
	res, err := c.SubmitBulk(t.Context(), "printer", jobs, producer.Key("acme"), producer.MaxWait(30*time.Second), producer.Atomic())
	if err != nil {
		t.Fatalf("SubmitBulk: %+v, %v", res, err)
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	want := `[{"data":` + doc + `},` +
		`{"data_base64":"AAH+/w==","headers":{"Nats-Msg-Id":"o-17","Shaper-Priority":"0","X-Tenant":"globex","X-Trace":"t-1"}},` +
		`{"data":"text","headers":{"Shaper-Delay":"1m0s"}}]`
	if r.body != want {
		t.Errorf("body\n%s\nwant\n%s", r.body, want)
	}
	if r.jobs[0].payload() != doc || r.jobs[1].payload() != "\x00\x01\xfe\xff" {
		t.Errorf("the downstream would get %q and %q", r.jobs[0].payload(), r.jobs[1].payload())
	}
	if r.header.Get("X-Tenant") != "acme" || r.header.Get("Shaper-Max-Wait") != "30s" ||
		r.header.Get("Shaper-Bulk-Atomic") != "true" || r.header.Get("Nats-Msg-Id") != "" {
		t.Errorf("request headers %v; want the key, max wait and atomic, and no Nats-Msg-Id", r.header)
	}
	if res.Status != producer.BulkAccepted || res.Downstream != "printer" || res.Accepted != 3 || res.Rejected != 0 || len(res.Jobs) != 3 {
		t.Fatalf("result %+v", res)
	}
	for i, jr := range res.Jobs {
		if jr.Index != i || !jr.Accepted || jr.Err() != nil {
			t.Errorf("job %d: %+v", i, jr)
		}
	}
	if res.Jobs[1].JobID != "j1" || res.Jobs[1].Position != 2 || res.Jobs[1].ETA != time.Second ||
		!res.Jobs[2].Duplicate || res.Jobs[2].JobID != "j0" {
		t.Errorf("jobs %+v", res.Jobs)
	}
}

// A partial answer: each job's Result is what its single-job reply would
// say, placed by its index; the totals come from the headers.
func TestSubmitBulkPartial(t *testing.T) {
	nc := runNATS(t)
	startBulkFake(t, nc, "shaper.bulk.printer", func(int, bulkRequest) *nats.Msg {
		m := bulkReply(
			accepted("j1", 1),
			rejected("rate_limited", 1, "key acme over its limit"),
			map[string]any{"status": "accepted", "downstream": "printer", "job_id": "j0", "duplicate": true, "state": "queued"},
			// answered out of order: placed by index
			map[string]any{"index": 4, "status": "rejected", "reason": "queue_full", "retry_after_seconds": 2, "error": "queue printer is full (10/10)"},
			map[string]any{"index": 3, "status": "rejected", "reason": "bad_request", "error": `headers "Shaper-Cost": "x" is not a whole number; 1..1 are valid`},
		)
		return m
	})
	jobs := make([]producer.BulkJob, 5)
	for i := range jobs {
		jobs[i] = producer.JSONJob([]byte(strconv.Itoa(i)))
	}
	res, err := producer.SubmitBulk(t.Context(), nc, "printer", jobs)
	if err != nil {
		t.Fatalf("SubmitBulk: %v", err)
	}
	if res.Status != producer.BulkPartial || res.Accepted != 2 || res.Rejected != 3 || len(res.Jobs) != 5 {
		t.Fatalf("result %+v", res)
	}
	checks := []struct {
		want       error
		reason     string
		retryAfter time.Duration
	}{
		{nil, "", 0},
		{producer.ErrRateLimited, "rate_limited", time.Second},
		{nil, "", 0},
		{producer.ErrBadRequest, "bad_request", 0},
		{producer.ErrQueueFull, "queue_full", 2 * time.Second},
	}
	for i, tt := range checks {
		jr := res.Jobs[i]
		err := jr.Err()
		if jr.Index != i || jr.Reason != tt.reason || jr.RetryAfter != tt.retryAfter || (tt.want == nil) != (err == nil) ||
			(tt.want != nil && (!errors.Is(err, tt.want) || jr.ErrorText == "")) {
			t.Errorf("job %d: %+v, Err %v; want %v with Retry-After %s", i, jr, err, tt.want, tt.retryAfter)
		}
	}
	if !res.Jobs[2].Duplicate || res.Jobs[2].State != "queued" || res.Jobs[0].JobID != "j1" {
		t.Errorf("accepted jobs %+v and %+v", res.Jobs[0], res.Jobs[2])
	}
}

// A request shaperd cannot read at all is rejected whole: the error is a
// *RejectedError with its reason, and there are no jobs.
func TestSubmitBulkRejectedWhole(t *testing.T) {
	nc := runNATS(t)
	startBulkFake(t, nc, "shaper.bulk.printer", func(int, bulkRequest) *nats.Msg {
		return wholeRejection("bad_request", 0, `index 1 at byte 40: a job is {"data": …} or {"data_base64": "…"}`)
	})
	res, err := producer.SubmitBulk(t.Context(), nc, "printer", []producer.BulkJob{producer.BytesJob(nil), producer.BytesJob([]byte("x"))})
	var rej *producer.RejectedError
	if !errors.Is(err, producer.ErrBadRequest) || !errors.As(err, &rej) || !strings.Contains(rej.ErrorText, "index 1") {
		t.Fatalf("err = %v, want a bad_request *RejectedError naming index 1", err)
	}
	if res.Status != producer.BulkRejected || res.Accepted != 0 || res.Rejected != 2 || res.Jobs != nil {
		t.Errorf("result %+v, want rejected whole without jobs", res)
	}
}

func TestSubmitBulkBadReply(t *testing.T) {
	nc := runNATS(t)
	var answer *nats.Msg
	startBulkFake(t, nc, "shaper.bulk.printer", func(int, bulkRequest) *nats.Msg { return answer })
	two := []producer.BulkJob{producer.JSONJob([]byte("1")), producer.JSONJob([]byte("2"))}
	withBody := func(status, body string) *nats.Msg {
		m := nats.NewMsg("")
		if status != "" {
			m.Header.Set("Shaper-Status", status)
		}
		m.Data = []byte(body)
		return m
	}
	tests := []struct {
		name  string
		reply *nats.Msg
		want  string
	}{
		{"not shaperd", withBody("", "pong"), `bulk status ""`},
		{"accepted without jobs", withBody("accepted", `{"status":"accepted"}`), "without jobs"},
		{"odd status", withBody("maybe", `{"jobs":[{"status":"accepted"},{"status":"accepted"}]}`), `"maybe"`},
		{"too few answers", bulkReply(accepted("j1", 1)), "1 job answers to 2 jobs"},
		{"index out of range", bulkReply(accepted("j1", 1), map[string]any{"index": 2, "status": "accepted"}), "index 2, want 0..1"},
		{"index twice", bulkReply(accepted("j1", 1), map[string]any{"index": 0, "status": "accepted"}), "two answers to job 0"},
		{"answer without status", bulkReply(accepted("j1", 1), map[string]any{"job_id": "j2"}), "job answer 1 has no status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			answer = tt.reply
			_, err := producer.SubmitBulk(t.Context(), nc, "printer", two)
			if !errors.Is(err, producer.ErrBadReply) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrBadReply naming %q", err, tt.want)
			}
		})
	}
}

// What cannot be sent is an error before sending, naming the job.
func TestSubmitBulkRefused(t *testing.T) {
	nc := runNATS(t)
	ok := []producer.BulkJob{producer.JSONJob([]byte("{}"))}
	tests := []struct {
		name string
		jobs []producer.BulkJob
		opts []producer.Option
		want string
	}{
		{"no jobs", nil, nil, "needs at least one job, got none"},
		{"not JSON", []producer.BulkJob{producer.JSONJob([]byte("{}")), producer.JSONJob([]byte("{oops"))}, nil,
			"bulk job 1 of 2: data is not one JSON value"},
		{"empty JSON", []producer.BulkJob{producer.JSONJob(nil)}, nil, "bulk job 0 of 1: data is not one JSON value"},
		{"request MsgID", ok, []producer.Option{producer.MsgID("o-1")}, "MsgID is an option of a bulk job"},
		{"job Atomic", []producer.BulkJob{producer.JSONJob([]byte("{}"), producer.Atomic())}, nil, "Atomic is an option of the bulk request"},
		{"two values", []producer.BulkJob{producer.BytesJob(nil, producer.Header("X-A", "1"), producer.Header("X-A", "2"))}, nil,
			`header "X-A" has 2 values`},
		{"not UTF-8", []producer.BulkJob{producer.BytesJob(nil, producer.Header("X-A", "\xff"))}, nil, `header "X-A" is not UTF-8`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := producer.SubmitBulk(t.Context(), nc, "printer", tt.jobs, tt.opts...)
			if err == nil || !strings.Contains(err.Error(), tt.want) || errors.Is(err, nats.ErrNoResponders) {
				t.Errorf("err = %v, want one naming %q, before sending", err, tt.want)
			}
		})
	}
	if _, err := producer.SubmitBulk(t.Context(), nc, "a.b", ok); err == nil || !strings.Contains(err.Error(), "letters, digits") {
		t.Errorf("bad downstream: %v", err)
	}
	c, err := producer.New(nc, producer.BulkSubjectPrefix("bulk.*"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SubmitBulk(t.Context(), "printer", ok); err == nil || !strings.Contains(err.Error(), `bulk subject prefix "bulk.*"`) {
		t.Errorf("bad prefix: %v", err)
	}
	if _, err := producer.SubmitBulk(t.Context(), nc, "printer", ok); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("nobody on shaper.bulk.printer: %v, want nats.ErrNoResponders", err)
	}
}

// PublishBulk sends the same body, with no reply subject.
func TestPublishBulk(t *testing.T) {
	nc := runNATS(t)
	f := startBulkFake(t, nc, "shaper.bulk.printer", func(int, bulkRequest) *nats.Msg { return nil })
	c, err := producer.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.PublishBulk("printer", []producer.BulkJob{producer.JSONJob([]byte(`{"a":1}`), producer.Key("k"))}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); len(f.requests()) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if reqs := f.requests(); len(reqs) != 1 || reqs[0].body != `[{"data":{"a":1},"headers":{"Shaper-Key":"k"}}]` {
		t.Errorf("published %+v", reqs)
	}
}

// limitedFake answers job by job: a job whose data is "limited" is rate
// limited (Retry-After 1) the first time its Nats-Msg-Id is seen, "bad" is
// always bad_request, any other is accepted with job id "j-<data>".
func limitedFake(t *testing.T, nc *nats.Conn) *bulkFake {
	seen := map[string]bool{} // only the fake's handler, one at a time, uses it
	return startBulkFake(t, nc, "shaper.bulk.printer", func(_ int, r bulkRequest) *nats.Msg {
		answers := make([]map[string]any, len(r.jobs))
		for i, j := range r.jobs {
			id := j.Headers["Nats-Msg-Id"]
			switch p := j.payload(); {
			case p == `"limited"` && !seen[id]:
				seen[id] = true
				answers[i] = rejected("rate_limited", 1, "key over its limit")
			case p == `"bad"`:
				answers[i] = rejected("bad_request", 0, "bad job")
			default:
				answers[i] = accepted("j-"+strings.Trim(p, `"`), i+1)
			}
		}
		return bulkReply(answers...)
	})
}

// SubmitBulkRetry sends again only the jobs rejected with Retry-After,
// after it, with the same Nats-Msg-Id, and merges their answers back.
func TestSubmitBulkRetry(t *testing.T) {
	nc := runNATS(t)
	f := limitedFake(t, nc)
	jobs := []producer.BulkJob{
		producer.JSONJob([]byte(`"a"`)),
		producer.JSONJob([]byte(`"limited"`)),
		producer.JSONJob([]byte(`"bad"`)),
		producer.JSONJob([]byte(`"b"`)),
		producer.JSONJob([]byte(`"limited"`), producer.MsgID("mine")),
	}
	var retries []producer.Retry
	start := time.Now()
	res, err := producer.SubmitBulkRetry(t.Context(), nc, "printer", jobs,
		producer.OnRetry(func(r producer.Retry) { retries = append(retries, r) }))
	took := time.Since(start)
	if err != nil {
		t.Fatalf("SubmitBulkRetry: %+v, %v", res, err)
	}
	reqs := f.requests()
	if len(reqs) != 2 || len(reqs[0].jobs) != 5 || len(reqs[1].jobs) != 2 {
		t.Fatalf("%d requests, want 2: all 5 jobs, then the 2 rate limited", len(reqs))
	}
	first, again := reqs[0].jobs, reqs[1].jobs
	ids := map[string]bool{}
	for i, j := range first {
		ids[j.Headers["Nats-Msg-Id"]] = true
		if j.Headers["Nats-Msg-Id"] == "" {
			t.Errorf("job %d has no Nats-Msg-Id", i)
		}
	}
	if len(ids) != 5 || first[4].Headers["Nats-Msg-Id"] != "mine" {
		t.Errorf("ids %v; want 5 distinct, job 4's own kept", ids)
	}
	if again[0].Headers["Nats-Msg-Id"] != first[1].Headers["Nats-Msg-Id"] || again[1].Headers["Nats-Msg-Id"] != "mine" {
		t.Errorf("sent again %+v; want jobs 1 and 4 with their ids", again)
	}
	if len(retries) != 1 || !errors.Is(retries[0].Err, producer.ErrRateLimited) ||
		!strings.Contains(retries[0].Err.Error(), "2 of 5 jobs") ||
		retries[0].Wait < time.Second || retries[0].Wait >= 1500*time.Millisecond {
		t.Errorf("retries %+v; want one, for 2 of 5 jobs rate limited, waiting 1s..1.5s", retries)
	}
	if took < time.Second {
		t.Errorf("done after %s, before the Retry-After of 1s", took)
	}
	if res.Status != producer.BulkPartial || res.Accepted != 4 || res.Rejected != 1 || len(res.Jobs) != 5 {
		t.Fatalf("result %+v", res)
	}
	for i, jr := range res.Jobs {
		if jr.Index != i || jr.Accepted == (i == 2) {
			t.Errorf("job %d: %+v", i, jr)
		}
	}
	if res.Jobs[1].JobID != "j-limited" || res.Jobs[4].Position != 2 || !errors.Is(res.Jobs[2].Err(), producer.ErrBadRequest) {
		t.Errorf("merged jobs %+v", res.Jobs)
	}
}

// Atomic: a request rejected for a job with Retry-After is sent again
// whole. A request rejected whole with Retry-After is sent again whole.
func TestSubmitBulkRetryWhole(t *testing.T) {
	nc := runNATS(t)
	f := startBulkFake(t, nc, "shaper.bulk.printer", func(call int, r bulkRequest) *nats.Msg {
		switch call {
		case 0: // every job is refused with the failing job's reason, the others naming it
			return bulkReply(rejected("queue_full", 1, "not queued: job 1 was rejected"),
				rejected("queue_full", 1, "queue printer is full (10/10)"), rejected("queue_full", 1, "not queued: job 1 was rejected"))
		case 1:
			return wholeRejection("unavailable", 1, "shutting down")
		}
		return bulkReply(accepted("j1", 1), accepted("j2", 2), accepted("j3", 3))
	})
	jobs := []producer.BulkJob{producer.BytesJob([]byte("a")), producer.BytesJob([]byte("b")), producer.BytesJob([]byte("c"))}
	var retries []producer.Retry
	res, err := producer.SubmitBulkRetry(t.Context(), nc, "printer", jobs, producer.Atomic(),
		producer.OnRetry(func(r producer.Retry) { retries = append(retries, r) }))
	if err != nil || res.Status != producer.BulkAccepted || res.Accepted != 3 || res.Jobs[2].JobID != "j3" {
		t.Fatalf("SubmitBulkRetry: %+v, %v", res, err)
	}
	reqs := f.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, r := range reqs {
		if len(r.jobs) != 3 || r.header.Get("Shaper-Bulk-Atomic") != "true" || r.body != reqs[0].body {
			t.Errorf("request %d: %d jobs, headers %v; want the first request again", i, len(r.jobs), r.header)
		}
	}
	if len(retries) != 2 || !errors.Is(retries[0].Err, producer.ErrQueueFull) || !strings.Contains(retries[0].Err.Error(), "atomic bulk request of 3 jobs") ||
		!errors.Is(retries[1].Err, producer.ErrUnavailable) {
		t.Errorf("retries %+v; want the atomic request's queue_full, then unavailable", retries)
	}
}

func TestSubmitBulkRetryStops(t *testing.T) {
	nc := runNATS(t)
	f := limitedFake(t, nc)
	jobs := []producer.BulkJob{producer.JSONJob([]byte(`"a"`)), producer.JSONJob([]byte(`"limited"`))}
	t.Run("max attempts", func(t *testing.T) {
		res, err := producer.SubmitBulkRetry(t.Context(), nc, "printer", jobs, producer.MaxAttempts(1))
		if err != nil || res.Status != producer.BulkPartial || !errors.Is(res.Jobs[1].Err(), producer.ErrRateLimited) {
			t.Fatalf("%+v, %v; want the first answer, job 1 rate limited", res, err)
		}
	})
	t.Run("deadline before Retry-After", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		before := len(f.requests())
		res, err := producer.SubmitBulkRetry(ctx, nc, "printer", jobs)
		if err != nil || res.Rejected != 1 || ctx.Err() != nil || len(f.requests()) != before+1 {
			t.Fatalf("%+v, %v; want the answer at once, not a wait past the deadline", res, err)
		}
	})
	t.Run("cancel during the wait", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		res, err := producer.SubmitBulkRetry(ctx, nc, "printer", jobs,
			producer.OnRetry(func(producer.Retry) { time.AfterFunc(100*time.Millisecond, cancel) }))
		if !errors.Is(err, context.Canceled) || !errors.Is(err, producer.ErrRateLimited) || len(res.Jobs) != 2 || !res.Jobs[0].Accepted {
			t.Fatalf("%+v, %v; want the answers so far, and an error matching context.Canceled and ErrRateLimited", res, err)
		}
	})
	t.Run("final rejection", func(t *testing.T) {
		before := len(f.requests())
		res, err := producer.SubmitBulkRetry(t.Context(), nc, "printer", []producer.BulkJob{producer.JSONJob([]byte(`"bad"`))},
			producer.OnRetry(func(r producer.Retry) { t.Errorf("retried: %+v", r) }))
		if err != nil || res.Status != producer.BulkRejected || len(f.requests()) != before+1 {
			t.Fatalf("%+v, %v; want bad_request answered once", res, err)
		}
	})
	t.Run("bad MaxRetryWait", func(t *testing.T) {
		if _, err := producer.SubmitBulkRetry(t.Context(), nc, "printer", jobs, producer.MaxRetryWait(0)); err == nil {
			t.Fatal("MaxRetryWait(0) accepted")
		}
	})
}
