package sink

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/outcome"
	"github.com/shaperd/shaper/shaper/policy"
)

// answer is a handler answering code with headers and body.
func answer(code int, hdr map[string]string, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		for k, v := range hdr {
			w.Header().Set(k, v)
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

// checkResult compares a result with want, Body as a string.
func checkResult(t *testing.T, got *outcome.Result, want outcome.Result) {
	t.Helper()
	if got == nil {
		t.Fatal("Result is nil, want one")
	}
	if got.StatusCode != want.StatusCode || got.Bytes != want.Bytes || got.Truncated != want.Truncated ||
		string(got.Body) != string(want.Body) {
		t.Errorf("result {code %d, %d bytes, truncated %v, body %q}, want {code %d, %d bytes, truncated %v, body %q}",
			got.StatusCode, got.Bytes, got.Truncated, got.Body, want.StatusCode, want.Bytes, want.Truncated, want.Body)
	}
	if len(got.Headers) != len(want.Headers) {
		t.Errorf("headers %v, want %v", got.Headers, want.Headers)
	}
	for k, v := range want.Headers {
		if got.Headers[k] != v {
			t.Errorf("header %s = %q, want %q (all: %v)", k, got.Headers[k], v, got.Headers)
		}
	}
}

func TestHTTPSinkResult(t *testing.T) {
	const body = `{"id":"print-1","state":"queued"}`
	s := newTestSink(t, answer(201, map[string]string{"Content-Type": "application/json",
		"Location": "/prints/1", "ETag": `"v1"`, "X-Other": "not kept"}, body),
		shaper.HTTPSinkSpec{Results: true, ResultBytes: 1024})
	fb, err := s.Deliver(context.Background(), testJob())
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	checkResult(t, fb.Result, outcome.Result{StatusCode: 201, Body: []byte(body), Bytes: len(body),
		Headers: map[string]string{"Content-Type": "application/json", "Location": "/prints/1", "ETag": `"v1"`}})
	if ct := fb.Result.ContentType(); ct != "application/json" {
		t.Errorf("ContentType() = %q", ct)
	}
}

// An error answer has its result too, and the error reads as it did
// without results.
func TestHTTPSinkResultOfError(t *testing.T) {
	body := "printer on fire: " + strings.Repeat("x", 300)
	h := answer(500, map[string]string{"Content-Type": "text/plain"}, body)
	_, plain := newTestSink(t, h, shaper.HTTPSinkSpec{}).Deliver(context.Background(), testJob())
	fb, err := newTestSink(t, h, shaper.HTTPSinkSpec{Results: true, ResultBytes: 1024}).Deliver(context.Background(), testJob())
	var perm *policy.PermanentError
	if err == nil || errors.As(err, &perm) || !strings.Contains(err.Error(), "printer on fire") {
		t.Fatalf("err = %v, want a retryable error quoting the body", err)
	}
	// The URLs differ (two servers); the rest must not.
	if a, b := strings.SplitN(plain.Error(), ": ", 2), strings.SplitN(err.Error(), ": ", 2); a[1] != b[1] {
		t.Errorf("error with results %q, without %q", b[1], a[1])
	}
	checkResult(t, fb.Result, outcome.Result{StatusCode: 500, Body: []byte(body), Bytes: len(body),
		Headers: map[string]string{"Content-Type": "text/plain"}})
}

func TestHTTPSinkResultBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		keep int
		body string
		want outcome.Result
	}{
		{"cut", 4, "0123456789", outcome.Result{Body: []byte("0123"), Bytes: 10, Truncated: true}},
		{"exact", 10, "0123456789", outcome.Result{Body: []byte("0123456789"), Bytes: 10}},
		{"no body kept", 0, "0123456789", outcome.Result{Bytes: 10, Truncated: true}},
		{"empty", 0, "", outcome.Result{}},
		{"over the prefix", 300, strings.Repeat("y", 1000), outcome.Result{Body: []byte(strings.Repeat("y", 300)),
			Bytes: 1000, Truncated: true}},
		// Past the drain bound the body is not read to its end: Bytes is
		// what was read.
		{"past the drain", 8, strings.Repeat("z", 200<<10), outcome.Result{Body: []byte("zzzzzzzz"),
			Bytes: maxErrBody + maxDrain + 1, Truncated: true}},
		{"keep past the drain, longer body", 100 << 10, strings.Repeat("z", 200<<10), outcome.Result{
			Body: []byte(strings.Repeat("z", 100<<10)), Bytes: 100<<10 + 1, Truncated: true}},
		{"keep past the drain", 100 << 10, strings.Repeat("z", 100<<10), outcome.Result{
			Body: []byte(strings.Repeat("z", 100<<10)), Bytes: 100 << 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSink(t, answer(200, map[string]string{"ETag": "e"}, tc.body),
				shaper.HTTPSinkSpec{Results: true, ResultBytes: tc.keep})
			fb, err := s.Deliver(context.Background(), testJob())
			if err != nil {
				t.Fatalf("Deliver: %v", err)
			}
			tc.want.StatusCode = 200
			tc.want.Headers = map[string]string{"ETag": "e", "Content-Type": "text/plain; charset=utf-8"}
			if tc.body == "" {
				delete(tc.want.Headers, "Content-Type") // nothing to sniff
			}
			checkResult(t, fb.Result, tc.want)
		})
	}
}

// Without Results, and without an answer, a try has no result.
func TestHTTPSinkNoResult(t *testing.T) {
	s := newTestSink(t, answer(200, map[string]string{"Content-Type": "text/plain"}, "ok"), shaper.HTTPSinkSpec{})
	if fb, err := s.Deliver(context.Background(), testJob()); err != nil || fb.Result != nil {
		t.Errorf("Deliver = %+v, %v; want no result", fb.Result, err)
	}
	release := make(chan struct{})
	defer close(release)
	s = newTestSink(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}, shaper.HTTPSinkSpec{Timeout: 50 * time.Millisecond, Results: true})
	if fb, err := s.Deliver(context.Background(), testJob()); err == nil || fb.Result != nil {
		t.Errorf("timeout: Deliver = %+v, %v; want an error and no result", fb.Result, err)
	}
}

// For turns results on for a lane that keeps records, and refuses a
// result_bytes out of range.
func TestForResults(t *testing.T) {
	lane := shaper.LaneSettings{Name: "n", Sink: shaper.SinkSpec{HTTP: &shaper.HTTPSinkSpec{URL: "http://x"}}}
	lane.Outcomes.ResultBytes = 64 << 10
	s := must(For(nil, nil)(lane))
	if hs := s.(*HTTPSink); hs.spec.Results {
		t.Errorf("results on for a lane that keeps no records: %+v", hs.spec)
	}
	lane.Outcomes.Keep = time.Hour
	s = must(For(nil, nil)(lane))
	if hs := s.(*HTTPSink); !hs.spec.Results || hs.spec.ResultBytes != 64<<10 {
		t.Errorf("results off for a lane that keeps records: %+v", hs.spec)
	}
	for _, n := range []int{-1, MaxResultBytes + 1} {
		lane.Outcomes.ResultBytes = n
		if _, err := For(nil, nil)(lane); err == nil || !strings.Contains(err.Error(), "want 0 to") {
			t.Errorf("ResultBytes %d: err = %v, want the valid range", n, err)
		}
	}
}

// startNATS runs an in-process NATS server and connects to it.
func startNATS(t *testing.T) *nats.Conn {
	t.Helper()
	opts := natsserver.DefaultTestOptions
	opts.Port = -1
	srv := natsserver.RunServer(&opts)
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func TestNATSSinkResult(t *testing.T) {
	nc := startNATS(t)
	sub, err := nc.Subscribe("print", func(m *nats.Msg) {
		r := nats.NewMsg(m.Reply)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Add("X-Printer", "p1")
		r.Header.Add("X-Printer", "p2")
		r.Data = []byte(`{"id":"print-1"}`)
		_ = nc.PublishMsg(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	for _, tc := range []struct {
		name string
		keep int
		want outcome.Result
	}{
		{"whole", 1024, outcome.Result{Body: []byte(`{"id":"print-1"}`), Bytes: 16}},
		{"cut", 5, outcome.Result{Body: []byte(`{"id"`), Bytes: 16, Truncated: true}},
		{"no body kept", 0, outcome.Result{Bytes: 16, Truncated: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lane := shaper.LaneSettings{Name: "n", Sink: shaper.SinkSpec{NATS: &shaper.NATSSinkSpec{
				Subject: "print", Request: true, Timeout: 5 * time.Second}}}
			lane.Outcomes.Keep, lane.Outcomes.ResultBytes = time.Hour, tc.keep
			fb, err := must(For(nc, nil)(lane)).Deliver(context.Background(), testJob())
			if err != nil {
				t.Fatalf("Deliver: %v", err)
			}
			tc.want.Headers = map[string]string{"Content-Type": "application/json", "X-Printer": "p1"}
			checkResult(t, fb.Result, tc.want)
		})
	}
}

// A publish sink, a request without Results and a request nobody answers
// have no result.
func TestNATSSinkNoResult(t *testing.T) {
	nc := startNATS(t)
	sub, err := nc.Subscribe("print", func(m *nats.Msg) {
		if m.Reply != "" {
			_ = m.Respond([]byte("ok"))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	for _, tc := range []struct {
		name    string
		spec    shaper.NATSSinkSpec
		wantErr bool
	}{
		{"publish", shaper.NATSSinkSpec{Subject: "print", Results: true}, false},
		{"results off", shaper.NATSSinkSpec{Subject: "print", Request: true}, false},
		{"no responders", shaper.NATSSinkSpec{Subject: "nobody", Request: true, Results: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &NATSSink{nc: nc, spec: tc.spec}
			fb, err := s.Deliver(context.Background(), testJob())
			if (err != nil) != tc.wantErr || fb.Result != nil {
				t.Errorf("Deliver = %+v, %v; want no result (error: %v)", fb.Result, err, tc.wantErr)
			}
		})
	}
}

// BenchmarkHTTPSinkDeliver: one try against a local server answering 200
// with a small JSON body, with and without keeping the answer. Without,
// allocs/op is the delivery path's cost before results existed.
func BenchmarkHTTPSinkDeliver(b *testing.B) {
	for _, bc := range []struct {
		name string
		spec shaper.HTTPSinkSpec
	}{
		{"results=off", shaper.HTTPSinkSpec{}},
		{"results=on", shaper.HTTPSinkSpec{Results: true, ResultBytes: 64 << 10}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := newTestSink(b, answer(200, map[string]string{"Content-Type": "application/json",
				"Location": "/prints/1"}, `{"id":"print-1","state":"queued"}`), bc.spec)
			job := testJob()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Deliver(context.Background(), job); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
