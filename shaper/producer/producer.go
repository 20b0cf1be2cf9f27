package producer

import (
	"context"
	"errors"
	"fmt"
	"net/textproto"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Defaults of a Client, matching shaperd's defaults.
const (
	DefaultSubjectPrefix = "shaper.jobs"
	DefaultStatusPrefix  = "shaper.status"
	DefaultKeyHeader     = HeaderKey
	DefaultTimeout       = 5 * time.Second
)

// Client submits jobs to shaperd over one NATS connection. It holds what
// must match the daemon's config: the subject and status prefixes and the
// key header.
// The zero value is not usable; create one with New. A Client is safe for
// concurrent use; it owns no goroutines and does not close the connection.
type Client struct {
	nc           *nats.Conn
	prefix       string // with the trailing dot
	statusPrefix string // with the trailing dot
	keyHeader    string
	timeout      time.Duration
	bulkPrefix   string // with the trailing dot; "": DefaultBulkSubjectPrefix (see bulk.go)
}

// ClientOption configures a Client.
type ClientOption func(*Client)

// SubjectPrefix sets the subject prefix jobs are sent under, shaperd's
// ingress.subject_prefix (default "shaper.jobs"): a job for downstream D
// goes to <prefix>.D.
func SubjectPrefix(prefix string) ClientOption {
	return func(c *Client) { c.prefix = prefix + "." }
}

// StatusPrefix sets the subject prefix of status look-ups, shaperd's
// ingress.status_prefix (default "shaper.status"): the status of job J of
// downstream D is asked on <prefix>.D.J. Status and SubmitAndWait use it.
func StatusPrefix(prefix string) ClientOption {
	return func(c *Client) { c.statusPrefix = prefix + "." }
}

// KeyHeader sets the header that carries Key, shaperd's ingress.key_header
// (default "Shaper-Key"). It is sent in canonical form ("x-tenant" as
// "X-Tenant"), the form shaperd looks it up in.
func KeyHeader(name string) ClientOption {
	return func(c *Client) { c.keyHeader = textproto.CanonicalMIMEHeaderKey(name) }
}

// Timeout sets how long one request waits for its reply (default 5s) when
// the context has no earlier deadline; 0 leaves it to the context alone.
// A request that times out returns an error matching nats.ErrTimeout.
func Timeout(d time.Duration) ClientOption {
	return func(c *Client) { c.timeout = d }
}

// New returns a Client that sends on nc. It fails when nc is nil or an
// option is out of range.
func New(nc *nats.Conn, opts ...ClientOption) (*Client, error) {
	c := &Client{nc: nc, prefix: DefaultSubjectPrefix + ".", statusPrefix: DefaultStatusPrefix + ".",
		keyHeader: DefaultKeyHeader, timeout: DefaultTimeout}
	for _, o := range opts {
		o(c)
	}
	p, sp := strings.TrimSuffix(c.prefix, "."), strings.TrimSuffix(c.statusPrefix, ".")
	switch {
	case nc == nil:
		return nil, errors.New("producer: New needs a *nats.Conn, got nil")
	case !isPrefix(p):
		return nil, fmt.Errorf("producer: subject prefix %q is not a subject prefix; write e.g. %s", p, DefaultSubjectPrefix)
	case !isPrefix(sp):
		return nil, fmt.Errorf("producer: status prefix %q is not a subject prefix; write e.g. %s", sp, DefaultStatusPrefix)
	case c.keyHeader == "" || strings.ContainsAny(c.keyHeader, " \t\r\n:"):
		return nil, fmt.Errorf("producer: key header %q is not a header name; write e.g. %s", c.keyHeader, DefaultKeyHeader)
	case c.timeout < 0:
		return nil, fmt.Errorf("producer: timeout must be positive (or 0: the context alone), got %s", c.timeout)
	}
	return c, nil
}

// Submit sends one job for downstream by request/reply and returns shaperd's
// answer. It blocks until the reply comes, ctx ends or the client's Timeout
// passes.
//
// The error is nil when the job was accepted (a duplicate included); a
// *RejectedError, with the same Result, when it was rejected; otherwise a
// transport or context error from nats.go, wrapped with the subject
// (nats.ErrNoResponders: no shaperd listens; nats.ErrTimeout: no reply in
// time — the job may still have been accepted, see SubmitRetry), or
// ErrBadReply. Submit ignores the options of SubmitRetry.
func (c *Client) Submit(ctx context.Context, downstream string, payload []byte, opts ...Option) (Result, error) {
	m, _, err := c.message(downstream, payload, opts)
	if err != nil {
		return Result{}, err
	}
	return c.request(ctx, m)
}

// Publish sends one job for downstream as a plain publish, with no reply
// subject: it returns once nats.go has buffered the message, and never
// learns the answer. shaperd handles the job as any other; a rejection is
// counted and dead-lettered, not reported. Use nc.Flush to be sure the
// server has the message. Publish ignores the options of SubmitRetry.
func (c *Client) Publish(downstream string, payload []byte, opts ...Option) error {
	m, _, err := c.message(downstream, payload, opts)
	if err != nil {
		return err
	}
	if err := c.nc.PublishMsg(m); err != nil {
		return fmt.Errorf("producer: publish to %s: %w", m.Subject, err)
	}
	return nil
}

// message builds the NATS message of one job and returns it with the
// options' retry settings.
func (c *Client) message(downstream string, payload []byte, opts []Option) (*nats.Msg, *job, error) {
	if !isToken(downstream) {
		return nil, nil, fmt.Errorf("producer: downstream %q is not a downstream name: use letters, digits, - and _", downstream)
	}
	j := &job{hdr: nats.Header{}, retry: defaultRetry}
	for _, o := range opts {
		o(j)
	}
	if j.key != "" {
		j.hdr.Set(c.keyHeader, j.key)
	}
	m := &nats.Msg{Subject: c.prefix + downstream, Header: j.hdr, Data: payload}
	return m, j, nil
}

// request sends m and parses the reply, under the client's timeout.
func (c *Client) request(ctx context.Context, m *nats.Msg) (Result, error) {
	reply, err := c.roundTrip(ctx, m, "submit to")
	if err != nil {
		return Result{}, err
	}
	res, err := parseReply(reply)
	if errors.Is(err, ErrBadReply) {
		return res, fmt.Errorf("%w on %s (headers %v)", err, m.Subject, reply.Header)
	}
	return res, err
}

// roundTrip sends m as a request and returns the reply, under the
// client's timeout; what names the request in an error ("submit to").
func (c *Client) roundTrip(ctx context.Context, m *nats.Msg, what string) (*nats.Msg, error) {
	rctx := ctx
	if c.timeout > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	reply, err := c.nc.RequestMsgWithContext(rctx, m)
	switch {
	case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("producer: %s %s: no reply within %s: %w", what, m.Subject, c.timeout, nats.ErrTimeout)
	case err != nil:
		return nil, fmt.Errorf("producer: %s %s: %w", what, m.Subject, err)
	}
	return reply, nil
}

// isPrefix reports whether p can prefix a subject: tokens without
// wildcards or white space, none of them empty.
func isPrefix(p string) bool {
	return p != "" && !strings.ContainsAny(p, " \t\r\n*>") &&
		!strings.HasPrefix(p, ".") && !strings.HasSuffix(p, ".") && !strings.Contains(p, "..")
}

// isToken reports whether s is a downstream name: letters, digits, - and _.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		ok := r == '-' || r == '_' || ('0' <= r && r <= '9') || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z')
		if !ok {
			return false
		}
	}
	return true
}

// Submit is Client.Submit on a Client with the defaults (subject prefix
// shaper.jobs, key header Shaper-Key, timeout 5s).
func Submit(ctx context.Context, nc *nats.Conn, downstream string, payload []byte, opts ...Option) (Result, error) {
	c, err := New(nc)
	if err != nil {
		return Result{}, err
	}
	return c.Submit(ctx, downstream, payload, opts...)
}

// SubmitRetry is Client.SubmitRetry on a Client with the defaults.
func SubmitRetry(ctx context.Context, nc *nats.Conn, downstream string, payload []byte, opts ...Option) (Result, error) {
	c, err := New(nc)
	if err != nil {
		return Result{}, err
	}
	return c.SubmitRetry(ctx, downstream, payload, opts...)
}
