package producer

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
)

// DefaultBulkSubjectPrefix is shaperd's default ingress.bulk.subject_prefix.
const DefaultBulkSubjectPrefix = "shaper.bulk"

// The values of BulkResult.Status, and of Shaper-Status on a bulk reply.
const (
	BulkAccepted = "accepted" // every job was accepted (duplicates included)
	BulkPartial  = "partial"  // some jobs were accepted, some rejected
	BulkRejected = "rejected" // no job was accepted
)

// BulkSubjectPrefix sets the subject prefix bulk requests are sent under,
// shaperd's ingress.bulk.subject_prefix (default "shaper.bulk"): a bulk
// request for downstream D goes to <prefix>.D. A prefix that is not a
// subject prefix makes SubmitBulk and SubmitBulkRetry fail before sending.
func BulkSubjectPrefix(prefix string) ClientOption {
	return func(c *Client) { c.bulkPrefix = prefix + "." }
}

// Atomic makes a bulk request all or nothing (Shaper-Bulk-Atomic: true):
// shaperd queues every job or none. If any job would be rejected, none is
// queued and the reply names the job that failed, with its reason and
// Retry-After; a job whose Nats-Msg-Id repeats an earlier one is no
// failure (it is answered as a duplicate). It is an option of the request:
// SubmitBulk refuses it among a BulkJob's Options.
func Atomic() Option { return setHeader(HeaderBulkAtomic, "true") }

// BulkJob is one job of a bulk request: its payload and its own headers.
// Make one with JSONJob or BytesJob, or set the fields.
type BulkJob struct {
	// Data is the payload the downstream receives.
	Data []byte
	// JSON sends Data as the job's "data": one JSON value, written into
	// the request as it is, so the downstream receives these very bytes.
	// SubmitBulk refuses Data that is not valid JSON. Without JSON, Data
	// is sent base64-encoded as "data_base64" and may hold any bytes.
	JSON bool
	// Options set this job's headers (Key, MsgID, MaxWait, Cost,
	// Priority, Delay, NotBefore, ReplyTo, ContentType, Header), sent as
	// its "headers" object; they win over the request's. Each header
	// holds one value. The options of SubmitRetry are ignored here, and
	// Atomic is refused: it belongs to the request.
	Options []Option
}

// JSONJob is a BulkJob whose data is the JSON value v, passed on as
// written.
func JSONJob(v []byte, opts ...Option) BulkJob { return BulkJob{Data: v, JSON: true, Options: opts} }

// BytesJob is a BulkJob whose data is any bytes, sent base64-encoded.
func BytesJob(b []byte, opts ...Option) BulkJob { return BulkJob{Data: b, Options: opts} }

// BulkJobResult is shaperd's answer to one job of a bulk request: exactly
// what its single-job reply would say (see Result), and its place.
type BulkJobResult struct {
	Index int // the job's index in the jobs passed to SubmitBulk, from 0
	Result
}

// Err returns nil for an accepted job (a duplicate included) and a
// *RejectedError, matching its reason's sentinel, for a rejected one.
func (r BulkJobResult) Err() error {
	if r.Accepted {
		return nil
	}
	return &RejectedError{Result: r.Result}
}

// BulkResult is shaperd's answer to a bulk request. Status is BulkAccepted,
// BulkPartial or BulkRejected; Accepted and Rejected count the jobs (a
// duplicate is accepted). Jobs holds one answer per job, Jobs[i] for the
// i-th job sent, and is empty when the request was rejected whole.
type BulkResult struct {
	Status     string
	Downstream string
	Accepted   int
	Rejected   int
	Jobs       []BulkJobResult
}

// SubmitBulk sends jobs for downstream as one bulk request on
// <bulk prefix>.<downstream> and returns shaperd's answer to each. opts are
// the request's headers, the defaults of every job (a job's own Options
// win), and Atomic; a request-wide MsgID is refused, as it would make every
// job after the first a duplicate. It blocks until the reply comes, ctx
// ends or the client's Timeout passes. Bad input (no jobs, a JSON job that
// is not JSON, a header with several values) is an error before sending.
//
// The error is nil when shaperd answered job by job, whatever it answered:
// read Status, Rejected and each job's Err. A request shaperd could not
// read at all (bad_request, unknown_downstream, payload_too_large when over
// ingress.bulk.max_bytes, ...) returns a *RejectedError with shaperd's
// reason and text, and a BulkResult with no Jobs. Otherwise the error is a
// transport or context error, as Submit's, or ErrBadReply. SubmitBulk
// ignores the options of SubmitRetry.
func (c *Client) SubmitBulk(ctx context.Context, downstream string, jobs []BulkJob, opts ...Option) (BulkResult, error) {
	r, err := c.newBulk(downstream, jobs, opts, false)
	if err != nil {
		return BulkResult{}, err
	}
	return c.sendBulk(ctx, r, nil)
}

// PublishBulk sends jobs for downstream as one bulk request by plain
// publish, with no reply subject, as Publish does for one job: shaperd
// handles the jobs as any others, and a rejected one is counted and
// dead-lettered, not reported. Its options are SubmitBulk's.
func (c *Client) PublishBulk(downstream string, jobs []BulkJob, opts ...Option) error {
	r, err := c.newBulk(downstream, jobs, opts, false)
	if err != nil {
		return err
	}
	m := r.message(nil)
	if err := c.nc.PublishMsg(m); err != nil {
		return fmt.Errorf("producer: publish bulk to %s: %w", m.Subject, err)
	}
	return nil
}

// bulkRequest is an encoded bulk request: each job's JSON object, ready to
// be sent all together or, on a retry, some of them.
type bulkRequest struct {
	subject string
	hdr     nats.Header
	retry   retrySettings
	atomic  bool
	objs    [][]byte // objs[i]: job i's JSON object
}

// newBulk checks and encodes a bulk request; with ids, it gives every job
// without a MsgID a random one, so that a job sent again is never queued
// twice.
func (c *Client) newBulk(downstream string, jobs []BulkJob, opts []Option, ids bool) (*bulkRequest, error) {
	subject, err := c.bulkSubject(downstream)
	if err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("producer: a bulk request to %s needs at least one job, got none", subject)
	}
	j := &job{hdr: nats.Header{}, retry: defaultRetry}
	for _, o := range opts {
		o(j)
	}
	if j.key != "" {
		j.hdr.Set(c.keyHeader, j.key)
	}
	if j.hdr.Get(HeaderMsgID) != "" {
		return nil, errors.New("producer: MsgID is an option of a bulk job, not of the request: " +
			"as the request's default every job would share the id, and all but the first be answered as duplicates")
	}
	r := &bulkRequest{subject: subject, hdr: j.hdr, retry: j.retry, atomic: j.hdr.Get(HeaderBulkAtomic) == "true",
		objs: make([][]byte, len(jobs))}
	for i, bj := range jobs {
		if r.objs[i], err = c.encodeJob(bj, ids); err != nil {
			return nil, fmt.Errorf("producer: bulk job %d of %d: %w", i, len(jobs), err)
		}
	}
	return r, nil
}

// bulkSubject is the subject of a bulk request for downstream.
func (c *Client) bulkSubject(downstream string) (string, error) {
	p := DefaultBulkSubjectPrefix
	if c.bulkPrefix != "" {
		p = strings.TrimSuffix(c.bulkPrefix, ".")
	}
	switch {
	case !isPrefix(p):
		return "", fmt.Errorf("producer: bulk subject prefix %q is not a subject prefix; write e.g. %s", p, DefaultBulkSubjectPrefix)
	case !isToken(downstream):
		return "", fmt.Errorf("producer: downstream %q is not a downstream name: use letters, digits, - and _", downstream)
	}
	return p + "." + downstream, nil
}

// encodeJob writes one job's JSON object: {"data":…} or
// {"data_base64":"…"}, and "headers" when it has any.
func (c *Client) encodeJob(bj BulkJob, id bool) ([]byte, error) {
	j := &job{hdr: nats.Header{}}
	for _, o := range bj.Options {
		o(j)
	}
	if j.key != "" {
		j.hdr.Set(c.keyHeader, j.key)
	}
	if id && j.hdr.Get(HeaderMsgID) == "" {
		j.hdr.Set(HeaderMsgID, rand.Text())
	}
	b := make([]byte, 0, len(bj.Data)*4/3+64)
	if bj.JSON {
		if !json.Valid(bj.Data) {
			var v any
			return nil, fmt.Errorf("data is not one JSON value (%v); send any bytes with BytesJob", json.Unmarshal(bj.Data, &v))
		}
		// Appended, not marshalled: encoding/json would compact the
		// value and escape <, > and &, and the downstream is to receive
		// the bytes as written.
		b = append(append(b, `{"data":`...), bj.Data...)
	} else {
		b = append(b, `{"data_base64":"`...)
		b = append(base64.StdEncoding.AppendEncode(b, bj.Data), '"')
	}
	if len(j.hdr) > 0 {
		h, err := jobHeaders(j.hdr)
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"headers":`...), h...)
	}
	return append(b, '}'), nil
}

// jobHeaders is a job's "headers" object: one string per header.
func jobHeaders(h nats.Header) ([]byte, error) {
	m := make(map[string]string, len(h))
	for name, vs := range h {
		switch {
		case name == HeaderBulkAtomic:
			return nil, errors.New("Atomic is an option of the bulk request, not of a job; pass it to SubmitBulk")
		case len(vs) != 1:
			return nil, fmt.Errorf("header %q has %d values; a bulk job's header holds one (join them, or send the job alone)", name, len(vs))
		case !utf8.ValidString(name) || !utf8.ValidString(vs[0]):
			return nil, fmt.Errorf("header %q is not UTF-8; a bulk job's headers are JSON strings", name)
		}
		m[name] = vs[0]
	}
	return json.Marshal(m) // sorted by name
}

// message is the NATS message carrying the jobs idx (nil: all), in order.
func (r *bulkRequest) message(idx []int) *nats.Msg {
	if idx == nil {
		idx = allIndexes(len(r.objs))
	}
	size := len(idx) + 1
	for _, i := range idx {
		size += len(r.objs[i])
	}
	b := append(make([]byte, 0, size), '[')
	for k, i := range idx {
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, r.objs[i]...)
	}
	return &nats.Msg{Subject: r.subject, Header: r.hdr, Data: append(b, ']')}
}

func allIndexes(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// sendBulk sends the jobs idx (nil: all) of r and parses the reply, whose
// Jobs are then in the order of idx.
func (c *Client) sendBulk(ctx context.Context, r *bulkRequest, idx []int) (BulkResult, error) {
	m := r.message(idx)
	reply, err := c.roundTrip(ctx, m, "submit bulk to")
	if err != nil {
		return BulkResult{}, err
	}
	n := len(idx)
	if idx == nil {
		n = len(r.objs)
	}
	res, err := parseBulkReply(reply, n)
	if errors.Is(err, ErrBadReply) {
		return res, fmt.Errorf("%w on %s (headers %v)", err, m.Subject, reply.Header)
	}
	return res, err
}

// bulkReplyBody is the JSON body of a bulk reply; a whole-request rejection
// has no jobs and is a single job's rejection body.
type bulkReplyBody struct {
	Status     string            `json:"status"`
	Downstream string            `json:"downstream"`
	Accepted   *int              `json:"accepted"`
	Rejected   *int              `json:"rejected"`
	Jobs       []json.RawMessage `json:"jobs"`
}

// parseBulkReply turns the reply to a bulk request of n jobs into a
// BulkResult. The error is nil for an answer job by job, a *RejectedError
// for a request rejected whole, and ErrBadReply when the reply is neither.
// Where headers and body both carry a value, the header wins.
func parseBulkReply(m *nats.Msg, n int) (BulkResult, error) {
	var b bulkReplyBody
	_ = json.Unmarshal(m.Data, &b) // a missing or odd body leaves the headers to speak
	res := BulkResult{Status: orDefault(m.Header.Get(HeaderStatus), b.Status), Downstream: b.Downstream}
	if b.Jobs == nil {
		if res.Status != BulkRejected {
			return BulkResult{}, fmt.Errorf("%w: bulk status %q without jobs", ErrBadReply, res.Status)
		}
		_, err := parseReply(m) // rejected whole: a single job's rejection
		res.Rejected = n
		return res, err
	}
	switch res.Status {
	case BulkAccepted, BulkPartial, BulkRejected:
	default:
		return BulkResult{}, fmt.Errorf("%w: bulk status %q, want accepted, partial or rejected", ErrBadReply, res.Status)
	}
	if len(b.Jobs) != n {
		return BulkResult{}, fmt.Errorf("%w: %d job answers to %d jobs", ErrBadReply, len(b.Jobs), n)
	}
	res.Jobs = make([]BulkJobResult, n)
	seen := make([]bool, n)
	accepted := 0
	for k, raw := range b.Jobs {
		i, r, err := parseBulkJob(raw, k, n)
		if err != nil {
			return BulkResult{}, err
		}
		if seen[i] {
			return BulkResult{}, fmt.Errorf("%w: two answers to job %d", ErrBadReply, i)
		}
		seen[i] = true
		res.Jobs[i] = BulkJobResult{Index: i, Result: r}
		if r.Accepted {
			accepted++
		}
	}
	res.Accepted = total(m.Header.Get(HeaderAccepted), b.Accepted, accepted)
	res.Rejected = total(m.Header.Get(HeaderRejected), b.Rejected, n-accepted)
	return res, nil
}

// parseBulkJob parses the k-th of n job answers: its index (k when it has
// none) and its single-job reply body.
func parseBulkJob(raw json.RawMessage, k, n int) (int, Result, error) {
	var ix struct {
		Index *int `json:"index"`
	}
	if err := json.Unmarshal(raw, &ix); err != nil {
		return 0, Result{}, fmt.Errorf("%w: job answer %d is not a JSON object: %v", ErrBadReply, k, err)
	}
	i := k
	if ix.Index != nil {
		i = *ix.Index
	}
	if i < 0 || i >= n {
		return 0, Result{}, fmt.Errorf("%w: job answer %d has index %d, want 0..%d", ErrBadReply, k, i, n-1)
	}
	r, err := parseReply(&nats.Msg{Data: raw})
	if errors.Is(err, ErrBadReply) {
		return 0, Result{}, fmt.Errorf("%w: job answer %d has no status of accepted or rejected", ErrBadReply, k)
	}
	return i, r, nil
}

// total is a count from the header h, else from the body's field b, else
// the count the caller made.
func total(h string, b *int, counted int) int {
	if v, err := strconv.Atoi(h); err == nil && v >= 0 {
		return v
	}
	if b != nil && *b >= 0 {
		return *b
	}
	return counted
}

// SubmitBulk is Client.SubmitBulk on a Client with the defaults (bulk
// subject prefix shaper.bulk, key header Shaper-Key, timeout 5s).
func SubmitBulk(ctx context.Context, nc *nats.Conn, downstream string, jobs []BulkJob, opts ...Option) (BulkResult, error) {
	c, err := New(nc)
	if err != nil {
		return BulkResult{}, err
	}
	return c.SubmitBulk(ctx, downstream, jobs, opts...)
}
