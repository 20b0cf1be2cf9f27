package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shaperd/shaper/shaper/producer"
)

// sinkOptions are the parsed flags of sink.
type sinkOptions struct {
	Listen     string
	Status     int
	Delay      time.Duration
	FailEvery  int
	RetryAfter int // seconds, on the simulated 503s
}

// bodyPreview is how many bytes of each body the sink prints.
const bodyPreview = 60

func cmdSink(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sink", "[-listen 127.0.0.1:8080] [-status 200] [-delay 0] [-fail-every N]", `Runs a tiny HTTP downstream for demos: it prints one line per request it
receives (time since its first request, method, path, Shaper-Job-Id,
Shaper-Attempt, body size, the first 60 bytes of the body) and answers -status.
-delay makes it a slow backend; -fail-every N answers every Nth request with
503 and Retry-After, so shaperd pauses the downstream and retries.
Stops on Ctrl-C (SIGINT) or SIGTERM.

Example (a downstream with sink: { http: { url: "http://127.0.0.1:8080/print" } }):
  shaperctl sink -listen 127.0.0.1:8080 -delay 200ms -fail-every 5
`, stderr)
	var o sinkOptions
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:8080", "`address` to listen on")
	fs.IntVar(&o.Status, "status", http.StatusOK, "HTTP `status` to answer")
	fs.DurationVar(&o.Delay, "delay", 0, "wait this long before answering (a slow backend)")
	fs.IntVar(&o.FailEvery, "fail-every", 0, "answer every `N`th request with 503 and Retry-After (0 = never)")
	fs.IntVar(&o.RetryAfter, "retry-after", 1, "Retry-After `seconds` on the -fail-every 503s")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	switch {
	case o.Status < 200 || o.Status > 599:
		return usageErr(stderr, "sink", "-status must be an HTTP status 200..599, got %d", o.Status)
	case o.Delay < 0:
		return usageErr(stderr, "sink", "-delay must be 0 or more, got %s", o.Delay)
	case o.FailEvery < 0:
		return usageErr(stderr, "sink", "-fail-every must be 0 (never) or more, got %d", o.FailEvery)
	case o.RetryAfter < 0:
		return usageErr(stderr, "sink", "-retry-after must be 0 or more seconds, got %d", o.RetryAfter)
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		fmt.Fprintf(stderr, "shaperctl sink: cannot listen on %s: %v; is something else on that port? pick another -listen\n", o.Listen, err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "sink listening on http://%s/ (any path), answering %d; Ctrl-C to stop\n", ln.Addr(), o.Status)
	if err := serveSink(ctx, ln, o, stdout); err != nil {
		fmt.Fprintf(stderr, "shaperctl sink: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// serveSink serves the sink on ln until ctx ends, then shuts the server
// down; requests still waiting out -delay end at once.
func serveSink(ctx context.Context, ln net.Listener, o sinkOptions, out io.Writer) error {
	srv := &http.Server{
		Handler:           &sink{o: o, out: out},
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// sink is the demo downstream's handler. Safe for concurrent use.
type sink struct {
	o   sinkOptions
	out io.Writer

	mu    sync.Mutex // guards the fields below and writes to out
	start time.Time  // arrival of the first request
	n     int        // requests so far
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20)) // a partial body is still worth a line
	fail := s.record(r, body)
	if s.o.Delay > 0 {
		t := time.NewTimer(s.o.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	}
	if fail {
		w.Header().Set(producer.HeaderRetryAfter, strconv.Itoa(s.o.RetryAfter))
		http.Error(w, "sink: simulated overload (-fail-every)", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(s.o.Status)
}

// record prints the request's line and reports whether it is one of the
// -fail-every requests.
func (s *sink) record(r *http.Request, body []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.n == 0 {
		s.start = now
	}
	s.n++
	fail := s.o.FailEvery > 0 && s.n%s.o.FailEvery == 0
	answer := ""
	if fail {
		answer = " -> 503"
	}
	fmt.Fprintf(s.out, "+%s %s %s job=%s attempt=%s %dB %s%s\n", formatSeconds(now.Sub(s.start)),
		r.Method, r.URL.RequestURI(), dash(r.Header.Get(producer.HeaderJobID)), dash(r.Header.Get(producer.HeaderAttempt)),
		len(body), preview(body, bodyPreview), answer)
	return fail
}

// preview is the first n bytes of b on one line: control bytes become '.',
// and "..." marks a cut.
func preview(b []byte, n int) string {
	cut := len(b) > n
	b = b[:min(len(b), n)]
	s := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			return '.'
		}
		return r
	}, string(b))
	if cut {
		s += "..."
	}
	return s
}
