package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer safe for the sink's handler goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startSink serves a sink on a random loopback port until the test ends.
func startSink(t *testing.T, o sinkOptions) (string, *lockedBuffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	out := &lockedBuffer{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- serveSink(ctx, ln, o, out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveSink: %v", err)
		}
	})
	return "http://" + ln.Addr().String(), out
}

func post(t *testing.T, url, jobID, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Shaper-Job-Id", jobID)
	req.Header.Set("Shaper-Attempt", "1")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestSink(t *testing.T) {
	url, out := startSink(t, sinkOptions{Status: http.StatusAccepted, FailEvery: 3, RetryAfter: 2})
	long := strings.Repeat("x", 70)
	codes := []int{
		post(t, url+"/print", "j1", `{"job":1}`).StatusCode,
		post(t, url+"/print?copy=2", "j2", "line1\nline2").StatusCode,
	}
	third := post(t, url+"/print", "j3", long)
	codes = append(codes, third.StatusCode)
	if want := []int{202, 202, 503}; !equalInts(codes, want) {
		t.Errorf("status codes %v, want %v", codes, want)
	}
	if got := third.Header.Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After = %q, want 2", got)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	t.Log("\n" + out.String())
	want := []*regexp.Regexp{
		regexp.MustCompile(`^\+0\.000s POST /print job=j1 attempt=1 9B \{"job":1\}$`),
		regexp.MustCompile(`^\+\d+\.\d{3}s POST /print\?copy=2 job=j2 attempt=1 11B line1\.line2$`),
		regexp.MustCompile(`^\+\d+\.\d{3}s POST /print job=j3 attempt=1 70B x{60}\.\.\. -> 503$`),
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d", len(lines), len(want))
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("line %d = %q, want %s", i, lines[i], re)
		}
	}
}

func TestSinkDelayEndsOnShutdown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	out := &lockedBuffer{}
	go func() { done <- serveSink(ctx, ln, sinkOptions{Status: 200, Delay: time.Hour}, out) }()
	reqDone := make(chan struct{})
	go func() {
		defer close(reqDone)
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		if resp, err := client.Post("http://"+ln.Addr().String()+"/", "text/plain", nil); err == nil {
			resp.Body.Close()
		}
	}()
	// The sink prints a request's line before its delay: once the line is
	// there, the request is in its delay (not still dialing).
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), "POST /"); {
		if time.Now().After(deadline) {
			t.Fatal("the request did not reach the sink within 10s")
		}
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serveSink: %v", err)
	}
	<-reqDone
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("shutdown took %v with a request in -delay", d)
	}
}

func TestPreview(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"hello", "hello"},
		{"a\tb\r\n", "a.b.."},
		{strings.Repeat("y", 61), strings.Repeat("y", 60) + "..."},
		{"\xff\xfe", ".."},
	}
	for _, tt := range tests {
		if got := preview([]byte(tt.in), 60); got != tt.want {
			t.Errorf("preview(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func equalInts(a, b []int) bool { return slices.Equal(a, b) }
