package sink

import (
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/shaper/outcome"
)

// MaxResultBytes bounds a sink's ResultBytes: the most of an answer's body
// a result keeps.
const MaxResultBytes = 1 << 20

// resultHeaders are the HTTP answer's fields a result keeps, by the names
// it keeps them under.
var resultHeaders = [...]string{"Content-Type", "Location", "ETag"}

// checkResultBytes says what is wrong with a sink's ResultBytes, if
// anything.
func checkResultBytes(kind string, n int) error {
	if n < 0 || n > MaxResultBytes {
		return fmt.Errorf("%s sink: result bytes %d: want 0 to %d (1MiB)", kind, n, MaxResultBytes)
	}
	return nil
}

// readHTTPResult reads resp's body once, as Deliver's drain does, and
// keeps what a result holds: the status, the resultHeaders present, the
// first keep bytes of the body and the size read. head is the body's first
// maxErrBody bytes, for an error message. The body is read up to
// maxErrBody+maxDrain bytes, or keep when larger; a longer one is cut
// there, its result Truncated and Bytes what was read.
func readHTTPResult(resp *http.Response, keep int) (head []byte, res *outcome.Result) {
	limit := max(maxErrBody+maxDrain, keep)
	prefix, err := readPrefix(resp.Body, max(maxErrBody, keep), resp.ContentLength)
	n := len(prefix)
	cut := err != nil // a body that broke off is not whole either
	if err == nil && n == max(maxErrBody, keep) {
		// Read the rest up to the limit, and one byte more: a body that
		// goes on past the limit then has Bytes > len(Body).
		rest, err := io.Copy(io.Discard, io.LimitReader(resp.Body, int64(limit-n)+1))
		n += int(rest)
		cut = err != nil
	}
	res = &outcome.Result{StatusCode: resp.StatusCode, Bytes: n}
	for _, k := range resultHeaders {
		if v := resp.Header.Get(k); v != "" {
			if res.Headers == nil {
				res.Headers = make(map[string]string, len(resultHeaders))
			}
			res.Headers[k] = v
		}
	}
	if b := min(keep, len(prefix)); b > 0 {
		res.Body = prefix[:b:b]
	}
	res.Truncated = cut || res.Bytes > len(res.Body)
	return prefix[:min(maxErrBody, len(prefix))], res
}

// readPrefix reads r up to n bytes or its end. hint is the body's size
// when known (-1: unknown), so that a small body takes one small buffer.
// The error is a read's other than io.EOF.
func readPrefix(r io.Reader, n int, hint int64) ([]byte, error) {
	size := min(n, 512)
	if hint >= 0 {
		size = int(min(int64(n), hint+1)) // +1: room to see the end
	}
	buf := make([]byte, 0, size)
	for len(buf) < n {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(n, 2*cap(buf)+512)-len(buf))
		}
		m, err := r.Read(buf[len(buf):min(n, cap(buf))])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// natsResult is a request sink's reply as a result: its headers (the first
// value of each), the first keep bytes of its payload and the payload's
// size.
func natsResult(m *nats.Msg, keep int) *outcome.Result {
	res := &outcome.Result{Bytes: len(m.Data)}
	for k, vs := range m.Header {
		if len(vs) == 0 {
			continue
		}
		if res.Headers == nil {
			res.Headers = make(map[string]string, len(m.Header))
		}
		res.Headers[k] = vs[0]
	}
	if b := min(keep, len(m.Data)); b > 0 {
		res.Body = slices.Clone(m.Data[:b])
	}
	res.Truncated = res.Bytes > len(res.Body)
	return res
}
