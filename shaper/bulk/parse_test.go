package bulk_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/shaperd/shaper/shaper/bulk"
)

// want is what a test expects of one job.
type want struct {
	data    string            // Data exactly, when err is ""
	headers map[string]string // Headers, when err is ""
	err     string            // a part of Err; "" means no Err
}

// parseCase is one body and what Parse should make of it.
type parseCase struct {
	name    string
	body    string
	maxJobs int    // 0 means 10
	err     string // a part of the whole-body error; "" means none
	jobs    []want
}

// ok is a good job with payload data and no headers.
func ok(data string) want { return want{data: data} }

// bad is a bad job whose Err holds err.
func bad(err string) want { return want{err: err} }

// parseCases are the table's rows; FuzzParse seeds its corpus with them.
var parseCases = []parseCase{
	// The two shapes.
	{name: "array", body: `[{"data":{"a":1}},{"data_base64":"aGk="}]`, jobs: []want{ok(`{"a":1}`), ok("hi")}},
	{name: "ndjson", body: "{\"data\":1}\n{\"data\":\"x\"}\n", jobs: []want{ok(`1`), ok(`"x"`)}},
	{name: "ndjson no final newline", body: "{\"data\":1}\n{\"data\":2}", jobs: []want{ok(`1`), ok(`2`)}},
	{name: "ndjson crlf and blank lines", body: "\r\n{\"data\":1}\r\n  \t\r\n\n{\"data\":2}\r\n", jobs: []want{ok(`1`), ok(`2`)}},
	{name: "leading space then array", body: " \n\t[ {\"data\" : 1} ] \n", jobs: []want{ok(`1`)}},
	{name: "leading space then ndjson", body: "  {\"data\":1}", jobs: []want{ok(`1`)}},

	// Data exactly as written.
	{name: "data keeps inner space", body: `[{"data": {"a": 1} }]`, jobs: []want{ok(`{"a": 1}`)}},
	{name: "data keeps escapes", body: `[{"data":"\u00e9\n"}]`, jobs: []want{ok(`"\u00e9\n"`)}},
	{name: "data trimmed of outer whitespace", body: "[{\"data\":\n\t 12.5e-3 \r\n}]", jobs: []want{ok(`12.5e-3`)}},
	{name: "data null is present", body: `[{"data":null}]`, jobs: []want{ok(`null`)}},
	{name: "data array", body: `[{"data":[1, "two", [true, false]]}]`, jobs: []want{ok(`[1, "two", [true, false]]`)}},
	{name: "data empty string", body: `[{"data":""}]`, jobs: []want{ok(`""`)}},
	{name: "data utf8", body: `[{"data":"héllo ✓"}]`, jobs: []want{ok(`"héllo ✓"`)}},
	{name: "data escaped key name", body: `[{"d\u0061ta":1}]`, jobs: []want{ok(`1`)}},

	// data_base64.
	{name: "base64 binary", body: `[{"data_base64":"AAH/"}]`, jobs: []want{ok("\x00\x01\xff")}},
	{name: "base64 empty", body: `[{"data_base64":""}]`, jobs: []want{ok("")}},
	{name: "base64 escaped slash", body: `[{"data_base64":"\/w=="}]`, jobs: []want{ok("\xff")}},
	{name: "base64 url-safe", body: `[{"data_base64":"_w=="}]`, jobs: []want{bad(`job 0: "data_base64" is not valid base64 at character 0; want standard base64`)}},
	{name: "base64 unpadded", body: `[{"data_base64":"aGk"}]`, jobs: []want{bad(`"data_base64" is not valid base64 at character 0; want standard base64`)}},
	{name: "base64 not a string", body: `[{"data_base64":12}]`, jobs: []want{bad(`job 0: "data_base64" is a number; want a string of standard base64`)}},
	{name: "base64 null", body: `[{"data_base64":null}]`, jobs: []want{bad(`"data_base64" is null`)}},

	// Headers.
	{name: "headers", body: `[{"data":1,"headers":{"Shaper-Key":"acme","Nats-Msg-Id":"o-17","X-Note":"a\"b"}}]`,
		jobs: []want{{data: `1`, headers: map[string]string{"Shaper-Key": "acme", "Nats-Msg-Id": "o-17", "X-Note": `a"b`}}}},
	{name: "headers before data", body: `[{"headers":{"K":"v"},"data":2}]`, jobs: []want{{data: `2`, headers: map[string]string{"K": "v"}}}},
	{name: "headers empty", body: `[{"data":1,"headers":{}}]`, jobs: []want{ok(`1`)}},
	{name: "headers null", body: `[{"data":1,"headers":null}]`, jobs: []want{ok(`1`)}},
	{name: "headers escaped", body: `[{"data":1,"headers":{"K\u0031":"\u00e9\t"}}]`, jobs: []want{{data: `1`, headers: map[string]string{"K1": "é\t"}}}},
	{name: "header value number", body: `[{"data":1},{"data":1},{"data":1},{"data":1,"headers":{"Shaper-Cost":3}}]`,
		jobs: []want{ok(`1`), ok(`1`), ok(`1`), bad(`job 3: "headers"."Shaper-Cost" is a number; header values are strings`)}},
	{name: "header value null", body: `[{"data":1,"headers":{"K":null}}]`, jobs: []want{bad(`"headers"."K" is null; header values are strings`)}},
	{name: "header value object", body: `[{"data":1,"headers":{"K":{"a":1}}}]`, jobs: []want{bad(`"headers"."K" is an object`)}},
	{name: "header value bool", body: `[{"data":1,"headers":{"K":true}}]`, jobs: []want{bad(`"headers"."K" is a boolean`)}},
	{name: "header empty name", body: `[{"data":1,"headers":{"":"v"}}]`, jobs: []want{bad(`"headers" has an empty header name; header names are non-empty`)}},
	{name: "header twice", body: `[{"data":1,"headers":{"K":"a","K":"b"}}]`, jobs: []want{bad(`"headers"."K" appears twice; give each header once`)}},
	{name: "headers not an object", body: `[{"data":1,"headers":["K","v"]}]`, jobs: []want{bad(`job 0: "headers" is an array; want an object of string values`)}},
	{name: "headers a string", body: `[{"data":1,"headers":"K: v"}]`, jobs: []want{bad(`"headers" is a string`)}},
	{name: "header long name cut", body: `[{"data":1,"headers":{"` + strings.Repeat("n", 100) + `":7}}]`,
		jobs: []want{bad(`"headers"."` + strings.Repeat("n", 64) + `"… is a number`)}},

	// Bad jobs among good ones.
	{name: "not objects", body: `[3,"x",[],null,true,{"data":1}]`, jobs: []want{
		bad(`job 0: is a number, not an object; a job is {"data": …}`), bad(`job 1: is a string, not an object`),
		bad(`job 2: is an array, not an object`), bad(`job 3: is null, not an object`),
		bad(`job 4: is a boolean, not an object`), ok(`1`)}},
	{name: "ndjson not an object", body: "{\"data\":1}\n\n\"x\"\n", jobs: []want{ok(`1`), bad(`job 1 (line 3): is a string, not an object`)}},
	{name: "neither", body: `[{},{"headers":{"K":"v"}}]`, jobs: []want{
		bad(`job 0: has neither "data" nor "data_base64"; give exactly one`), bad(`job 1: has neither`)}},
	{name: "both", body: `[{"data":1,"data_base64":"aGk="}]`, jobs: []want{bad(`job 0: has both "data" and "data_base64"; give exactly one`)}},
	{name: "unknown field", body: `[{"data":1,"dta":{"x":[1]}}]`, jobs: []want{bad(`job 0: unknown field "dta"; a job has "data" or "data_base64", and optionally "headers"`)}},
	{name: "field case matters", body: `[{"Data":1}]`, jobs: []want{bad(`unknown field "Data"`)}},
	{name: "field twice", body: `[{"data":1,"data":2}]`, jobs: []want{bad(`job 0: field "data" appears twice; give each field once`)}},
	{name: "headers twice", body: `[{"data":1,"headers":{},"headers":null}]`, jobs: []want{bad(`field "headers" appears twice`)}},
	{name: "first fault named", body: `[{"x":1,"data":2,"data":3}]`, jobs: []want{bad(`unknown field "x"`)}},

	// Whole-body errors.
	{name: "empty", body: "", err: "bulk: the body is empty; want a JSON array of job objects, or NDJSON"},
	{name: "only space", body: " \r\n\t", err: "the body is empty"},
	{name: "empty array", body: "[ ]", err: "bulk: the array has no jobs; want at least one job object"},
	{name: "not json", body: "hello", err: "bulk: line 1, byte 0: found 'h'; want a JSON value: an object, array, string, number, true, false or null; " +
		"a body that does not start with '[' is NDJSON, one job object per line"},
	{name: "ndjson broken line", body: "{\"data\":1}\n{\"data\":}\n", err: "bulk: line 2, byte 19: found '}'; want a JSON value"},
	{name: "ndjson object spans lines", body: "{\"data\":\n1}\n", err: "bulk: line 1, byte 8: the line ends; want a JSON value"},
	{name: "ndjson two objects on a line", body: "{\"data\":1} {\"data\":2}\n", err: "bulk: line 1, byte 11: found '{'; want the end of the line after the job object"},
	{name: "ndjson blank lines only", body: "\n\n\n", err: "the body is empty"},
	{name: "array broken", body: `[{"data":1},{"data":tru}]`, err: `bulk: index 1, byte 23: found '}'; want the rest of true`},
	{name: "array unterminated", body: `[{"data":1}`, err: `bulk: index 0, byte 11: the body ends; want ',' or ']' after a job`},
	{name: "array trailing comma", body: `[{"data":1},]`, err: `bulk: index 1, byte 12: found ']'; want a JSON value`},
	{name: "array trailing garbage", body: `[{"data":1}] x`, err: `bulk: after the array, byte 13: found 'x'; want only whitespace after the array's closing ']'`},
	{name: "array then second array", body: `[{"data":1}][{"data":1}]`, err: `after the array, byte 12`},
	{name: "unterminated string", body: `[{"data":"abc}]`, err: `bulk: index 0, byte 15: the body ends; want the closing '"' of a string`},
	{name: "control char in string", body: "[{\"data\":\"a\tb\"}]", err: `byte 11: found byte 0x9; want a string character`},
	{name: "bad escape", body: `[{"data":"\x"}]`, err: `byte 11: found 'x'; want an escape`},
	{name: "short unicode escape", body: `[{"data":"\u12"}]`, err: `want four hex digits after \u`},
	{name: "leading zero", body: `[{"data":01}]`, err: `byte 10: found '1'; want ',' or '}' after a job field`},
	{name: "bare minus", body: `[{"data":-}]`, err: `byte 10: found '}'; want a digit after '-'`},
	{name: "bad fraction", body: `[{"data":1.}]`, err: `want a digit after '.'`},
	{name: "bad exponent", body: `[{"data":1e+}]`, err: `want a digit in the exponent`},
	{name: "unquoted key", body: `[{data:1}]`, err: `bulk: index 0, byte 2: found 'd'; want a field name in quotes`},
	{name: "missing colon", body: `[{"data" 1}]`, err: `want ':' after an object key`},
	{name: "broken inside unknown field", body: `[{"x":[1,}]`, err: `index 0, byte 9: found '}'; want a JSON value`},
	{name: "broken inside bad header", body: `[{"data":1,"headers":{"K":[}}]`, err: `found '}'; want a JSON value`},
	{name: "header name unquoted", body: `[{"data":1,"headers":{K:"v"}}]`, err: `want a header name in quotes`},
	{name: "object member broken", body: `[{"data":{"a" 1}}]`, err: `want ':' after an object key`},
	{name: "object missing comma", body: `[{"data":{"a":1 "b":2}}]`, err: `want ',' or '}' after an object member`},
	{name: "array missing comma", body: `[{"data":[1 2]}]`, err: `want ',' or ']' after an array element`},
	{name: "empty key after comma", body: `[{"data":{"a":1,}}]`, err: `want a string key`},
	{name: "bom", body: "\xef\xbb\xbf[]", err: `line 1, byte 0: found byte 0xef; want a JSON value`},
	{name: "too deep", body: `[{"data":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}]`, err: `values nest deeper than 10000 levels`},

	// max_jobs.
	{name: "at max array", body: `[{"data":1},{"data":2}]`, maxJobs: 2, jobs: []want{ok(`1`), ok(`2`)}},
	{name: "over max array", body: `[{"data":1},{"data":2},{"data":3}]`, maxJobs: 2,
		err: `bulk: index 2, byte 23: more than max_jobs (2) jobs; send at most 2 jobs per request`},
	{name: "over max stops early", body: `[{"data":1},{"data":2},{"data":3}, this is never read`, maxJobs: 2, err: `more than max_jobs (2) jobs`},
	{name: "at max ndjson", body: "{\"data\":1}\n\n{\"data\":2}\n\n", maxJobs: 2, jobs: []want{ok(`1`), ok(`2`)}},
	{name: "over max ndjson", body: "{\"data\":1}\n\n{\"data\":2}\n{\"data\":3}\nnot json", maxJobs: 2,
		err: `bulk: line 4, byte 23: more than max_jobs (2) jobs; send at most 2 jobs per request`},
	{name: "max jobs zero", body: `[{"data":1}]`, maxJobs: -1, err: `bulk: maxJobs is -1; it must be at least 1`},
}

func TestParse(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			maxJobs := tc.maxJobs
			if maxJobs == 0 {
				maxJobs = 10
			}
			jobs, err := bulk.Parse([]byte(tc.body), maxJobs)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one holding %q", err, tc.err)
				}
				if jobs != nil {
					t.Fatalf("jobs %v with the error", jobs)
				}
				return
			}
			if err != nil {
				t.Fatalf("error %v", err)
			}
			checkJobs(t, jobs, tc.jobs)
		})
	}
}

// checkJobs compares jobs to what is wanted of them.
func checkJobs(t *testing.T, jobs []bulk.Job, wants []want) {
	t.Helper()
	if len(jobs) != len(wants) {
		t.Fatalf("%d jobs, want %d: %+v", len(jobs), len(wants), jobs)
	}
	for i, w := range wants {
		j := jobs[i]
		if j.Index != i {
			t.Errorf("job %d: Index %d", i, j.Index)
		}
		if w.err != "" {
			if j.Err == nil || !strings.Contains(j.Err.Error(), w.err) {
				t.Errorf("job %d: Err %v, want one holding %q", i, j.Err, w.err)
			}
			if j.Data != nil || j.Headers != nil {
				t.Errorf("job %d: bad job has Data %q, Headers %v", i, j.Data, j.Headers)
			}
			continue
		}
		if j.Err != nil {
			t.Errorf("job %d: Err %v", i, j.Err)
			continue
		}
		if j.Data == nil || string(j.Data) != w.data {
			t.Errorf("job %d: Data %q, want %q", i, j.Data, w.data)
		}
		if !maps.Equal(j.Headers, w.headers) || (w.headers == nil) != (j.Headers == nil) {
			t.Errorf("job %d: Headers %v, want %v", i, j.Headers, w.headers)
		}
	}
}

// TestDataIsSubslice checks that "data" is not copied, and that appending
// to it cannot write over the body.
func TestDataIsSubslice(t *testing.T) {
	body := []byte(`[{"data":[1,2]},{"data":3}]`)
	jobs, err := bulk.Parse(body, 10)
	if err != nil {
		t.Fatal(err)
	}
	if &jobs[0].Data[0] != &body[9] {
		t.Error("Data is a copy, not a sub-slice of the body")
	}
	if cap(jobs[0].Data) != len(jobs[0].Data) {
		t.Errorf("Data has capacity %d past its length %d", cap(jobs[0].Data), len(jobs[0].Data))
	}
	_ = append(jobs[0].Data, 'x')
	if string(body) != `[{"data":[1,2]},{"data":3}]` {
		t.Errorf("appending to Data changed the body: %s", body)
	}
}

// TestTooManyStopsEarly checks that a body of many jobs is refused at job
// max_jobs+1, before the broken rest is read.
func TestTooManyStopsEarly(t *testing.T) {
	body := "[" + strings.Repeat(`{"data":1},`, 1000) + "{broken"
	_, err := bulk.Parse([]byte(body), 5)
	if err == nil || !strings.Contains(err.Error(), "bulk: index 5, byte 56: more than max_jobs (5) jobs") {
		t.Fatalf("error %v", err)
	}
}
