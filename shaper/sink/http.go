package sink

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/batch"
	"github.com/shaperd/shaper/shaper/policy"
	"github.com/shaperd/shaper/shaper/tracing"
)

// Defaults of an HTTP sink.
const (
	DefaultHTTPMethod = http.MethodPost
	// DefaultTimeout bounds one try of an HTTP or NATS sink.
	DefaultTimeout   = 10 * time.Second
	defaultIdleConns = 32
	maxDrain         = 64 << 10 // response bytes read so the connection can be reused
	maxErrBody       = 200      // response bytes quoted in an error
)

// HTTPSink delivers jobs as HTTP requests (docs/protocol.md "Delivery to a downstream"):
// the payload is the body; the configured headers are sent, then
// Shaper-Job-Id, Shaper-Attempt and Idempotency-Key (the job ID, the same on
// every try). Of the producer's headers only Content-Type and the W3C trace
// context (traceparent, tracestate, baggage) are passed on: the others
// were addressed to the shaper (e.g. the admission key) and must not leak
// to the downstream.
//
// Responses: 2xx = done; 429 or 503 with a valid Retry-After (seconds or an
// HTTP-date), or without one but with rate-limit headers saying nothing is
// left until a reset = *policy.PushbackError; other 429/503 =
// *policy.OverloadError (retryable); other 5xx, timeouts and connection
// errors = retryable errors; 3xx (redirects are not followed) and other
// 4xx = *policy.PermanentError. Every answer's rate-limit headers (see
// readQuota) come back as the Feedback, whatever the status. With
// Results set, so does every answer itself (Feedback.Result): its status,
// Content-Type, Location and ETag, its body's size and its first
// ResultBytes; a try without an answer (timeout, connection error) has no
// Result.
//
// An HTTPSink is safe for concurrent use. Deliver blocks until the response
// (or the timeout or ctx); the zero value is not usable, use NewHTTPSink.
type HTTPSink struct {
	spec   shaper.HTTPSinkSpec
	client *http.Client
	now    func() time.Time // for HTTP-date Retry-After; time.Now
	tracer trace.Tracer     // nil: tracing off (Traced)
	span   trace.SpanStartOption
}

// Traced makes each try a CLIENT span (with the HTTP semantic conventions'
// method, URL, server address and status code) under the span of the
// context it is sent with, whose context the downstream receives as its
// traceparent; tp nil leaves the sink untraced. A plain span rather than
// otelhttp's transport: that wraps every body and costs 3 times as much
// of the drain ceiling (BENCHMARKS.md "Traces").
func (s *HTTPSink) Traced(tp trace.TracerProvider) *HTTPSink {
	if tp == nil {
		return s
	}
	s.tracer = tracing.Tracer(tp)
	u, _ := url.Parse(s.spec.URL) // NewHTTPSink parsed it
	s.span = trace.WithAttributes(semconv.HTTPRequestMethodKey.String(s.spec.Method), semconv.URLFull(spanURL(u)),
		semconv.ServerAddress(u.Hostname()), semconv.ServerPort(port(u)))
	return s
}

// spanURL is u as a span's url.full, redacted as the HTTP conventions
// ask: credentials become REDACTED:REDACTED, and so do the values of the
// query keys that carry signatures (a tracing backend is read by more
// people than the config).
func spanURL(u *url.URL) string {
	c := *u
	if c.User != nil {
		c.User = url.UserPassword(redacted, redacted)
	}
	if c.RawQuery != "" {
		pairs := strings.Split(c.RawQuery, "&")
		for i, p := range pairs {
			k, _, _ := strings.Cut(p, "=")
			if name, err := url.QueryUnescape(k); err == nil && signatureKeys[name] {
				pairs[i] = k + "=" + redacted
			}
		}
		c.RawQuery = strings.Join(pairs, "&")
	}
	return c.String()
}

// redacted replaces a secret in a span's url.full.
const redacted = "REDACTED"

// signatureKeys are the query keys whose values the HTTP conventions
// redact in url.full by default.
var signatureKeys = map[string]bool{"AWSAccessKeyId": true, "Signature": true, "sig": true, "X-Goog-Signature": true}

// port is u's port, or its scheme's default.
func port(u *url.URL) int {
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return p
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

// do sends req, in a CLIENT span when the sink is traced and req's context
// carries a span.
func (s *HTTPSink) do(req *http.Request) (*http.Response, error) {
	if s.tracer == nil || !trace.SpanContextFromContext(req.Context()).IsValid() {
		return s.client.Do(req)
	}
	ctx, span := s.tracer.Start(req.Context(), s.spec.Method, trace.WithSpanKind(trace.SpanKindClient), s.span)
	tracing.Propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := s.client.Do(req)
	switch {
	case err != nil:
		span.SetStatus(codes.Error, err.Error())
	default:
		span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
		if resp.StatusCode >= 400 {
			span.SetStatus(codes.Error, resp.Status)
		}
	}
	span.End()
	return resp, err
}

// NewHTTPSink validates spec (an absolute http or https URL, ResultBytes 0
// to MaxResultBytes) and applies its defaults: Method POST, Timeout 10s,
// MaxIdleConnsPerHost 32.
func NewHTTPSink(spec shaper.HTTPSinkSpec) (*HTTPSink, error) {
	u, err := url.Parse(spec.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("http sink: url %q: want an absolute http:// or https:// URL", spec.URL)
	}
	spec.Method = strings.ToUpper(cmp.Or(spec.Method, DefaultHTTPMethod))
	spec.Timeout = cmp.Or(spec.Timeout, DefaultTimeout)
	if spec.Timeout < 0 || spec.MaxIdleConnsPerHost < 0 {
		return nil, fmt.Errorf("http sink: timeout and max idle conns must not be negative")
	}
	if err := checkResultBytes("http", spec.ResultBytes); err != nil {
		return nil, err
	}
	spec.MaxIdleConnsPerHost = cmp.Or(spec.MaxIdleConnsPerHost, defaultIdleConns)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = spec.MaxIdleConnsPerHost
	tr.MaxIdleConns = max(tr.MaxIdleConns, spec.MaxIdleConnsPerHost)
	return &HTTPSink{
		spec: spec,
		client: &http.Client{
			Transport:     tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		now: time.Now,
	}, nil
}

// Close closes idle connections. In-flight requests are not affected.
func (s *HTTPSink) Close() error {
	s.client.CloseIdleConnections()
	return nil
}

// Deliver sends one try of job; see HTTPSink for how responses map to
// errors and what the Feedback holds.
func (s *HTTPSink) Deliver(ctx context.Context, job *queue.Job) (shaper.Feedback, error) {
	return s.send(ctx, job.Payload, func(h http.Header) {
		if ct := job.Header.Get(hdrContentType); ct != "" && h.Get(hdrContentType) == "" {
			h.Set(hdrContentType, ct)
		}
		passTrace(job.Header, h)
		h.Set(hdrJobID, job.ID)
		h.Set(hdrAttempt, strconv.Itoa(job.Attempt))
		h.Set(hdrIdemKey, job.ID)
	}, false)
}

// DeliverBatch sends one call carrying c's jobs: the body in c's encoding
// (its Content-Type, unless the sink's headers set one), the call's
// headers (batch.Headers). Answers map to errors as Deliver's, for the
// whole call; a 2xx answer's body is read (up to maxBatchAnswer) for the
// jobs it names as failed (Feedback.Failed).
func (s *HTTPSink) DeliverBatch(ctx context.Context, c shaper.Call) (shaper.Feedback, error) {
	body, ct, err := c.Encoding.Encode(c.Jobs)
	if err != nil {
		return shaper.Feedback{}, &policy.PermanentError{Err: fmt.Errorf("batch %s: %w", c.ID, err)}
	}
	return s.send(ctx, body, func(h http.Header) {
		if h.Get(hdrContentType) == "" {
			h.Set(hdrContentType, ct)
		}
		for k, vs := range batch.Headers(c.ID, c.Jobs) {
			h[k] = vs
		}
	}, true)
}

// traceHeaders are the W3C trace context's headers, passed on from the
// producer's message to the downstream: the trace goes through the shaper
// whether or not it exports spans of its own (an exported try's own
// context replaces traceparent and tracestate: Traced injects it).
var traceHeaders = [...]string{"traceparent", "tracestate", "baggage"}

// passTrace copies the trace context of the producer's headers from (as
// a NATS message has them: any case) to h.
func passTrace(from, h http.Header) {
	if len(from) == 0 {
		return
	}
	for k, vs := range from {
		for _, name := range traceHeaders {
			if len(k) == len(name) && strings.EqualFold(k, name) {
				h[http.CanonicalHeaderKey(name)] = vs
			}
		}
	}
}

// maxBatchAnswer bounds the bytes of a call's 2xx answer read for the
// jobs it names as failed.
const maxBatchAnswer = 4 << 20

// send sends one request with body and the sink's headers, then set's;
// call says it carries a batch (its 2xx answer is read for failed jobs).
func (s *HTTPSink) send(ctx context.Context, body []byte, set func(http.Header), call bool) (shaper.Feedback, error) {
	ctx, cancel := context.WithTimeout(ctx, s.spec.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, s.spec.Method, s.spec.URL, bytes.NewReader(body))
	if err != nil {
		return shaper.Feedback{}, &policy.PermanentError{Err: fmt.Errorf("build request: %w", err)}
	}
	for k, vs := range s.spec.Headers {
		req.Header[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
	}
	set(req.Header)
	resp, err := s.do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%s %s: timeout after %s: %w", s.spec.Method, s.spec.URL, s.spec.Timeout, err)
			return shaper.Feedback{}, err
		}
		return shaper.Feedback{}, fmt.Errorf("%s %s: %w", s.spec.Method, s.spec.URL, err)
	}
	defer resp.Body.Close()
	var fb shaper.Feedback
	if call && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		all, err := io.ReadAll(io.LimitReader(resp.Body, maxBatchAnswer))
		if err != nil {
			return shaper.Feedback{}, fmt.Errorf("%s %s: reading the answer: %w", s.spec.Method, s.spec.URL, err)
		}
		fb.Failed, _ = batch.ParseAnswer(all)
		resp.Body = io.NopCloser(bytes.NewReader(all))
	}
	var head []byte
	if s.spec.Results {
		head, fb.Result = readHTTPResult(resp, s.spec.ResultBytes)
	} else {
		head, _ = io.ReadAll(io.LimitReader(resp.Body, maxErrBody))
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	}
	now := s.now()
	fb.Quota, fb.Malformed = readQuota(resp.Header, now)
	wait, ok, present := retryAfter(resp.Header.Values(hdrRetryAfter), now)
	if present && !ok {
		fb.Malformed++
	}
	if !ok && fb.Quota != nil && fb.Quota.Remaining == 0 && fb.Quota.Reset >= 0 {
		wait, ok = fb.Quota.Reset, true // nothing left until the reset
	}
	return fb, s.classify(resp, head, wait, ok)
}

// classify maps a response to Deliver's error; wait is how long the
// downstream asked to wait (ok = it did).
func (s *HTTPSink) classify(resp *http.Response, head []byte, wait time.Duration, ok bool) error {
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return nil
	}
	err := fmt.Errorf("%s %s: %s", s.spec.Method, s.spec.URL, resp.Status)
	if len(head) > 0 && code >= 400 {
		err = fmt.Errorf("%w: %q", err, head)
	}
	switch {
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		if ok {
			return &policy.PushbackError{RetryAfter: wait, Err: err}
		}
		return &policy.OverloadError{Err: err, Limited: code == http.StatusTooManyRequests}
	case code >= 300 && code < 400:
		return &policy.PermanentError{Err: fmt.Errorf("%w: redirect to %q not followed (configure the final URL)",
			err, resp.Header.Get("Location"))}
	case code >= 400 && code < 500:
		return &policy.PermanentError{Err: err}
	}
	return err // 5xx and anything unexpected: retry
}

// retryAfter reads a Retry-After field: delta-seconds or an HTTP-date (a
// date in the past means 0), believed up to policy.MaxQuotaPause. present is whether it was
// sent; ok whether it could be read.
func retryAfter(vs []string, now time.Time) (d time.Duration, ok, present bool) {
	if len(vs) == 0 {
		return 0, false, false
	}
	d, ok = parseRetryAfter(vs[0], now)
	return d, ok && len(vs) == 1, true
}

// parseRetryAfter reads one Retry-After value. ok is false when it is
// empty or invalid.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		return time.Duration(min(n, int64(policy.MaxQuotaPause/time.Second))) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), policy.MaxQuotaPause), true
}
