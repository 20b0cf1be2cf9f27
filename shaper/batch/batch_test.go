package batch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/shaperd/shaper/queue"
)

func jobsOf(payloads ...string) []*queue.Job {
	jobs := make([]*queue.Job, len(payloads))
	for i, p := range payloads {
		jobs[i] = &queue.Job{ID: "j" + string(rune('a'+i)), Attempt: i + 1, Payload: []byte(p)}
	}
	return jobs
}

func TestParseEncodingNamesTheValidOnes(t *testing.T) {
	for _, e := range Encodings {
		if got, err := ParseEncoding(string(e)); err != nil || got != e {
			t.Errorf("ParseEncoding(%q) = %q, %v", e, got, err)
		}
	}
	_, err := ParseEncoding("xml")
	if err == nil || !strings.Contains(err.Error(), `"xml"`) || !strings.Contains(err.Error(), "json_array, ndjson or multipart") {
		t.Fatalf("ParseEncoding(xml): %v", err)
	}
}

func TestCheckRefusesWhatAnEncodingCannotCarry(t *testing.T) {
	for _, c := range []struct {
		e       Encoding
		payload string
		ok      bool
	}{
		{JSONArray, `{"order":1}`, true},
		{JSONArray, ` 42 `, true},
		{JSONArray, `not json`, false},
		{JSONArray, ``, false},
		{NDJSON, `{"order":1}`, true},
		{NDJSON, "plain text", true},
		{NDJSON, "two\nlines", false},
		{Multipart, "any\x00bytes\n\r", true},
	} {
		err := c.e.Check([]byte(c.payload))
		if (err == nil) != c.ok {
			t.Errorf("%s.Check(%q) = %v, want ok %v", c.e, c.payload, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), string(c.e)) {
			t.Errorf("%s.Check(%q): %q does not name the encoding", c.e, c.payload, err)
		}
	}
	if err := Encoding("xml").Check(nil); err == nil {
		t.Error("an unknown encoding checks nothing")
	}
}

func TestJSONArrayIsAnArrayOfThePayloadsAsWritten(t *testing.T) {
	jobs := jobsOf(`{"order":1}`, `[1, 2]`, `"x"`)
	body, ct, err := JSONArray.Encode(jobs)
	if err != nil || ct != "application/json" {
		t.Fatalf("Encode: %q, %v", ct, err)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(body, &items); err != nil {
		t.Fatalf("body %s is not a JSON array: %v", body, err)
	}
	if len(items) != 3 || string(items[0]) != `{"order":1}` || string(items[1]) != `[1, 2]` || string(items[2]) != `"x"` {
		t.Fatalf("items %q", items)
	}
}

func TestNDJSONIsALinePerJob(t *testing.T) {
	body, ct, err := NDJSON.Encode(jobsOf(`{"order":1}`, `{"order":2}`, `tail`))
	if err != nil || ct != "application/x-ndjson" {
		t.Fatalf("Encode: %q, %v", ct, err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if strings.Join(lines, "|") != `{"order":1}|{"order":2}|tail` {
		t.Fatalf("lines %q", lines)
	}
}

func TestMultipartIsAPartPerJobWithItsIDAndAttempt(t *testing.T) {
	jobs := jobsOf("\x00\x01binary", `{"order":2}`)
	jobs[1].Header = http.Header{"Content-Type": {"application/json"}}
	body, ct, err := Multipart.Encode(jobs)
	if err != nil {
		t.Fatal(err)
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "multipart/mixed" {
		t.Fatalf("Content-Type %q: %v", ct, err)
	}
	r := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for i, want := range []struct{ ct, id, attempt, data string }{
		{"application/octet-stream", "ja", "1", "\x00\x01binary"},
		{"application/json", "jb", "2", `{"order":2}`},
	} {
		p, err := r.NextPart()
		if err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
		data, _ := io.ReadAll(p)
		if p.Header.Get("Content-Type") != want.ct || p.Header.Get(HeaderJobID) != want.id ||
			p.Header.Get(HeaderAttempt) != want.attempt || string(data) != want.data {
			t.Errorf("part %d: %v %q", i, p.Header, data)
		}
	}
	if _, err := r.NextPart(); err != io.EOF {
		t.Fatalf("after the last job's part: %v", err)
	}
}

func TestHeadersNameTheJobsInBodyOrder(t *testing.T) {
	h := Headers("b-1", jobsOf("a", "b", "c"))
	for k, want := range map[string]string{HeaderBatchID: "b-1", "Idempotency-Key": "b-1", HeaderBatchSize: "3",
		HeaderJobIDs: "ja,jb,jc", HeaderAttempts: "1,2,3"} {
		if got := h.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}

func TestParseAnswerNamesTheFailedJobs(t *testing.T) {
	failed, bad := ParseAnswer([]byte(`{"imported":3,"failed":[
		{"job_id":"ja","error":"card declined","retry":false},
		{"job_id":"jb","error":"locked","retry":true},
		{"job_id":"jc","error":"no retry given"},
		{"error":"names no job"},
		{"job_id":"ja","error":"named twice","retry":true}]}`))
	if bad != 1 || len(failed) != 3 {
		t.Fatalf("failed %+v, malformed %d", failed, bad)
	}
	if f := failed["ja"]; f.Retry || f.Error != "card declined" {
		t.Errorf("ja: %+v", f)
	}
	if f := failed["jb"]; !f.Retry || f.Error != "locked" {
		t.Errorf("jb: %+v", f)
	}
	if f := failed["jc"]; !f.Retry {
		t.Errorf("jc, no retry given: %+v; want a retry", f)
	}
	for _, body := range []string{``, `ok`, `[1,2]`, `{"imported":3}`, `{"failed":[]}`, `{broken`} {
		if failed, bad := ParseAnswer([]byte(body)); failed != nil || bad != 0 {
			t.Errorf("ParseAnswer(%q) = %v, %d; want every job succeeded", body, failed, bad)
		}
	}
	if failed, bad := ParseAnswer([]byte(`{"failed":"all of them"}`)); failed != nil || bad != 1 {
		t.Errorf("a failed value that is not a list: %v, %d", failed, bad)
	}
}

// Any payloads Check lets through come out of the body as they went in.
func FuzzEncodeCarriesWhatCheckAllows(f *testing.F) {
	f.Add([]byte(`{"a":1}`), []byte(`2`), []byte("x\ny"))
	f.Add([]byte(" [ ] "), []byte(`"\n"`), []byte{0, 1})
	f.Fuzz(func(t *testing.T, a, b, c []byte) {
		for _, e := range Encodings {
			var jobs []*queue.Job
			for i, p := range [][]byte{a, b, c} {
				if e.Check(p) == nil {
					jobs = append(jobs, &queue.Job{ID: "j" + string(rune('a'+i)), Payload: p})
				}
			}
			if len(jobs) == 0 {
				continue
			}
			body, ct, err := e.Encode(jobs)
			if err != nil {
				t.Fatalf("%s: %v", e, err)
			}
			got := decode(t, e, body, ct)
			if len(got) != len(jobs) {
				t.Fatalf("%s: %d payloads in, %d out of %q", e, len(jobs), len(got), body)
			}
			for i, j := range jobs {
				want := j.Payload
				if e == JSONArray {
					want = bytes.TrimSpace(want) // a JSON value's surrounding space is not part of it
				}
				if !bytes.Equal(got[i], want) {
					t.Fatalf("%s: payload %d is %q out, %q in", e, i, got[i], want)
				}
			}
		}
	})
}

// decode is body's payloads, read back as a downstream would.
func decode(t *testing.T, e Encoding, body []byte, ct string) [][]byte {
	t.Helper()
	var out [][]byte
	switch e {
	case JSONArray:
		var items []json.RawMessage
		if err := json.Unmarshal(body, &items); err != nil {
			t.Fatalf("json_array body %q: %v", body, err)
		}
		for _, it := range items {
			out = append(out, it)
		}
	case NDJSON:
		out = bytes.Split(body, []byte{'\n'})
	case Multipart:
		_, params, _ := mime.ParseMediaType(ct)
		r := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		for {
			p, err := r.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("multipart body: %v", err)
			}
			data, _ := io.ReadAll(p)
			out = append(out, data)
		}
	}
	return out
}
