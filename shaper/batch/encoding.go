package batch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/textproto"
	"strconv"
	"strings"

	"github.com/shaperd/shaper/queue"
)

// Encoding is how the jobs of one call make its body.
type Encoding string

// The encodings.
const (
	// JSONArray: [p1,p2,…], application/json; every payload must be JSON.
	JSONArray Encoding = "json_array"
	// NDJSON: the payloads joined by newlines, application/x-ndjson; a
	// payload must not hold a newline.
	NDJSON Encoding = "ndjson"
	// Multipart: multipart/mixed, one part per job with its Content-Type,
	// Shaper-Job-Id and Shaper-Attempt; any bytes.
	Multipart Encoding = "multipart"
)

// Encodings are the valid encodings, in the order the docs list them.
var Encodings = []Encoding{JSONArray, NDJSON, Multipart}

// ParseEncoding returns the encoding named s, or an error that lists the
// valid ones.
func ParseEncoding(s string) (Encoding, error) {
	for _, e := range Encodings {
		if string(e) == s {
			return e, nil
		}
	}
	return "", fmt.Errorf("unknown encoding %q: want json_array, ndjson or multipart", s)
}

// Check reports why payload cannot be carried in a call of encoding e
// (nil: it can). Its message names the encoding and what would be valid.
func (e Encoding) Check(payload []byte) error {
	switch e {
	case JSONArray:
		if !json.Valid(payload) {
			return fmt.Errorf("the downstream takes jobs in a json_array call, so a payload must be one JSON value; this one is not JSON")
		}
	case NDJSON:
		if i := bytes.IndexByte(payload, '\n'); i >= 0 {
			return fmt.Errorf("the downstream takes jobs in an ndjson call, one per line, so a payload must not hold a newline; this one has one at byte %d", i)
		}
	case Multipart:
	default:
		return fmt.Errorf("unknown encoding %q: want json_array, ndjson or multipart", string(e))
	}
	return nil
}

// Encode returns the body of a call carrying jobs, in their order, and
// its Content-Type. Every payload must have passed Check.
func (e Encoding) Encode(jobs []*queue.Job) (body []byte, contentType string, err error) {
	switch e {
	case JSONArray:
		return join(jobs, '[', ',', ']'), "application/json", nil
	case NDJSON:
		return join(jobs, 0, '\n', 0), "application/x-ndjson", nil
	case Multipart:
		return encodeMultipart(jobs)
	}
	return nil, "", fmt.Errorf("unknown encoding %q: want json_array, ndjson or multipart", string(e))
}

// join is the jobs' payloads between open and end (0: none), sep between
// two.
func join(jobs []*queue.Job, open, sep, end byte) []byte {
	n := 2 + len(jobs)
	for _, j := range jobs {
		n += len(j.Payload)
	}
	b := make([]byte, 0, n)
	if open != 0 {
		b = append(b, open)
	}
	for i, j := range jobs {
		if i > 0 {
			b = append(b, sep)
		}
		b = append(b, j.Payload...)
	}
	if end != 0 {
		b = append(b, end)
	}
	return b
}

// encodeMultipart is a multipart/mixed body, a part per job.
func encodeMultipart(jobs []*queue.Job) ([]byte, string, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, j := range jobs {
		ct := ""
		if j.Header != nil {
			ct = j.Header.Get("Content-Type")
		}
		if ct == "" {
			ct = "application/octet-stream"
		}
		h := textproto.MIMEHeader{}
		h.Set("Content-Type", ct)
		h.Set(HeaderJobID, j.ID)
		h.Set(HeaderAttempt, strconv.Itoa(j.Attempt))
		p, err := w.CreatePart(h)
		if err != nil {
			return nil, "", err
		}
		if _, err := p.Write(j.Payload); err != nil {
			return nil, "", err
		}
	}
	if err := w.Close(); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), "multipart/mixed; boundary=" + w.Boundary(), nil
}

// joinIDs is the jobs' ids, comma separated, in order.
func joinIDs(jobs []*queue.Job) string {
	var b strings.Builder
	for i, j := range jobs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(j.ID)
	}
	return b.String()
}
