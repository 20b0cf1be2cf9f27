package sink

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/policy"
)

// These tests use real time and a real httptest.Server (synctest bubbles
// cannot hold real network I/O); every time assertion is generous.

func newTestSink(t testing.TB, h http.HandlerFunc, spec shaper.HTTPSinkSpec) *HTTPSink {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	spec.URL = srv.URL + "/print"
	s, err := NewHTTPSink(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func testJob() *queue.Job {
	return &queue.Job{ID: "job-1", Downstream: "printer", Key: "tenant-secret", Attempt: 3, Payload: []byte("hello"),
		Header: http.Header{"Content-Type": {"text/plain"}, "Shaper-Key": {"tenant-secret"}, "X-Other": {"1"}}}
}

func TestHTTPSinkRequest(t *testing.T) {
	var got *http.Request
	var body []byte
	s := newTestSink(t, func(w http.ResponseWriter, r *http.Request) {
		got, body = r, must(io.ReadAll(r.Body))
		w.WriteHeader(http.StatusNoContent)
	}, shaper.HTTPSinkSpec{Method: "put", Headers: http.Header{"Authorization": {"Bearer x"}}})
	if _, err := s.Deliver(context.Background(), testJob()); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	want := map[string]string{"Shaper-Job-Id": "job-1", "Shaper-Attempt": "3", "Idempotency-Key": "job-1",
		"Authorization": "Bearer x", "Content-Type": "text/plain", "Shaper-Key": "", "X-Other": ""}
	for k, v := range want {
		if g := got.Header.Get(k); g != v {
			t.Errorf("header %s = %q, want %q", k, g, v)
		}
	}
	if got.Method != http.MethodPut || got.URL.Path != "/print" || string(body) != "hello" {
		t.Errorf("request %s %s body %q", got.Method, got.URL.Path, body)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestHTTPSinkStatuses(t *testing.T) {
	date := time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		name     string
		code     int
		header   map[string]string
		want     string // nil, pushback, permanent, retryable
		pushback [2]time.Duration
	}{
		{"200", 200, nil, "nil", [2]time.Duration{}},
		{"202", 202, nil, "nil", [2]time.Duration{}},
		{"429 seconds", 429, map[string]string{"Retry-After": "7"}, "pushback", [2]time.Duration{7 * time.Second, 7 * time.Second}},
		{"503 http-date", 503, map[string]string{"Retry-After": date}, "pushback", [2]time.Duration{time.Second, 3 * time.Second}},
		{"503 no retry-after", 503, nil, "retryable", [2]time.Duration{}},
		{"429 bad retry-after", 429, map[string]string{"Retry-After": "soon"}, "retryable", [2]time.Duration{}},
		{"500", 500, nil, "retryable", [2]time.Duration{}},
		{"404", 404, nil, "permanent", [2]time.Duration{}},
		{"302 not followed", 302, map[string]string{"Location": "/elsewhere"}, "permanent", [2]time.Duration{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hits := 0
			s := newTestSink(t, func(w http.ResponseWriter, r *http.Request) {
				hits++
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.code)
				_, _ = io.WriteString(w, strings.Repeat("b", 100<<10)) // larger than the drain limit
			}, shaper.HTTPSinkSpec{})
			_, err := s.Deliver(context.Background(), testJob())
			var pb *policy.PushbackError
			var perm *policy.PermanentError
			switch {
			case tc.want == "nil" && err != nil:
				t.Fatalf("err = %v, want nil", err)
			case tc.want == "pushback" && !errors.As(err, &pb):
				t.Fatalf("err = %v, want pushback", err)
			case tc.want == "pushback" && (pb.RetryAfter < tc.pushback[0] || pb.RetryAfter > tc.pushback[1]):
				t.Fatalf("RetryAfter = %v, want in %v", pb.RetryAfter, tc.pushback)
			case tc.want == "permanent" && !errors.As(err, &perm):
				t.Fatalf("err = %v, want permanent", err)
			case tc.want == "retryable" && (err == nil || errors.As(err, &pb) || errors.As(err, &perm)):
				t.Fatalf("err = %v, want a retryable error", err)
			}
			if hits != 1 {
				t.Errorf("%d requests, want 1 (redirects must not be followed)", hits)
			}
			if tc.code == 302 && !strings.Contains(err.Error(), "not followed") {
				t.Errorf("302 error %q does not say why", err)
			}
		})
	}
}

func TestHTTPSinkTimeout(t *testing.T) {
	release := make(chan struct{})
	s := newTestSink(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}, shaper.HTTPSinkSpec{Timeout: 50 * time.Millisecond})
	defer close(release)
	begin := time.Now()
	_, err := s.Deliver(context.Background(), testJob())
	var pb *policy.PushbackError
	var perm *policy.PermanentError
	if err == nil || errors.As(err, &pb) || errors.As(err, &perm) || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("err = %v, want a retryable timeout", err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("timeout took %v", d)
	}
}

func TestHTTPSinkConnectionError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	s, err := NewHTTPSink(shaper.HTTPSinkSpec{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Deliver(context.Background(), testJob())
	var perm *policy.PermanentError
	if err == nil || errors.As(err, &perm) {
		t.Fatalf("err = %v, want retryable", err)
	}
}

func TestNewHTTPSinkValidates(t *testing.T) {
	for _, u := range []string{"", "ftp://x", "/relative", "http://"} {
		if _, err := NewHTTPSink(shaper.HTTPSinkSpec{URL: u}); err == nil {
			t.Errorf("NewHTTPSink(%q) succeeded", u)
		}
	}
	if _, err := For(nil, nil)(shaper.LaneSettings{Name: "n", Sink: shaper.SinkSpec{NATS: &shaper.NATSSinkSpec{}}}); err == nil {
		t.Error("For(nil, nil)(NATS spec) succeeded")
	}
	s, err := For(nil, nil)(shaper.LaneSettings{Name: "n", Concurrency: 100, Sink: shaper.SinkSpec{HTTP: &shaper.HTTPSinkSpec{URL: "http://x"}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := s.(*HTTPSink)
	if hs.spec.Method != "POST" || hs.spec.Timeout != 10*time.Second || hs.spec.MaxIdleConnsPerHost != 100 {
		t.Errorf("defaults: %+v", hs.spec)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true}, {"120", 2 * time.Minute, true}, {" 3 ", 3 * time.Second, true},
		{"-1", 0, false}, {"", 0, false}, {"1.5", 0, false},
		{"Wed, 01 Jan 2025 00:00:10 GMT", 10 * time.Second, true},
		{"Tue, 31 Dec 2024 23:00:00 GMT", 0, true},
	} {
		got, ok := parseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRetryAfter(%q) = %v,%v want %v,%v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
