package bulk_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/shaperd/shaper/shaper/bulk"
)

// FuzzParse checks Parse's promises on any body, and checks it against
// encoding/json: a body encoding/json reads is never refused whole, and
// each good job holds what encoding/json finds in its object.
func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		if len(tc.body) <= 4096 { // a long seed makes the fuzzer crawl
			f.Add([]byte(tc.body), uint8(max(tc.maxJobs, 0)))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, m uint8) {
		maxJobs := int(m)
		jobs, err := bulk.Parse(body, maxJobs)
		if err != nil {
			if jobs != nil {
				t.Fatalf("jobs %v with error %v", jobs, err)
			}
			if !strings.HasPrefix(err.Error(), "bulk: ") {
				t.Fatalf("error %q lacks the package's prefix", err)
			}
		} else {
			checkShape(t, jobs, maxJobs)
		}
		if maxJobs == 0 {
			if err == nil {
				t.Fatal("maxJobs 0 took a body")
			}
			return
		}
		objs, ok := oracle(body)
		switch {
		case ok && len(objs) >= 1 && len(objs) <= maxJobs && err != nil:
			t.Fatalf("encoding/json reads %d jobs, Parse refuses the body: %v", len(objs), err)
		case err == nil && len(body) < 5000 && !ok:
			t.Fatal("Parse took a body encoding/json cannot read")
		case err == nil && len(objs) != len(jobs):
			t.Fatalf("Parse read %d jobs, encoding/json %d", len(jobs), len(objs))
		case err == nil:
			for i, job := range jobs {
				checkJob(t, job, objs[i])
			}
		}
	})
}

// checkShape checks what Parse promises of the jobs of a body it took.
func checkShape(t *testing.T, jobs []bulk.Job, maxJobs int) {
	t.Helper()
	if len(jobs) < 1 || len(jobs) > maxJobs {
		t.Fatalf("%d jobs, maxJobs %d", len(jobs), maxJobs)
	}
	for i, job := range jobs {
		switch {
		case job.Index != i:
			t.Fatalf("job %d has Index %d", i, job.Index)
		case job.Err == nil && job.Data == nil:
			t.Fatalf("job %d has neither Err nor Data", i)
		case job.Err != nil && (job.Data != nil || job.Headers != nil):
			t.Fatalf("bad job %d has Data or Headers", i)
		case job.Err != nil && !strings.HasPrefix(job.Err.Error(), "job "):
			t.Fatalf("job %d: Err %q does not name the job", i, job.Err)
		}
	}
}

// checkJob compares a job to what encoding/json finds in its object; obj
// is nil when the job is not a JSON object.
func checkJob(t *testing.T, job bulk.Job, obj map[string]json.RawMessage) {
	t.Helper()
	if job.Err != nil {
		return
	}
	if obj == nil {
		t.Fatalf("job %d: not an object, yet no Err", job.Index)
	}
	for k := range obj {
		if k != "data" && k != "data_base64" && k != "headers" {
			t.Fatalf("job %d: field %q taken", job.Index, k)
		}
	}
	if raw, ok := obj["data"]; ok {
		if !json.Valid(job.Data) || !bytes.Equal(job.Data, raw) {
			t.Fatalf("job %d: Data %q, encoding/json has %q", job.Index, job.Data, raw)
		}
	} else {
		var data []byte
		if err := json.Unmarshal(obj["data_base64"], &data); err != nil || !bytes.Equal(data, job.Data) {
			t.Fatalf("job %d: Data %q, encoding/json decodes %q (%v)", job.Index, job.Data, data, err)
		}
	}
	var headers map[string]string
	if raw, ok := obj["headers"]; ok {
		if err := json.Unmarshal(raw, &headers); err != nil {
			t.Fatalf("job %d: headers %s taken, encoding/json says %v", job.Index, raw, err)
		}
	}
	if len(headers) != len(job.Headers) || !maps.Equal(headers, job.Headers) {
		t.Fatalf("job %d: Headers %v, encoding/json has %v", job.Index, job.Headers, headers)
	}
}

// oracle reads body with encoding/json: each job's object (nil for a job
// that is not an object), and whether the whole body could be read.
func oracle(body []byte) ([]map[string]json.RawMessage, bool) {
	var raws []json.RawMessage
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		if json.Unmarshal(body, &raws) != nil {
			return nil, false
		}
	} else {
		for line := range bytes.SplitSeq(body, []byte{'\n'}) {
			if line = bytes.Trim(line, " \t\r"); len(line) == 0 {
				continue
			}
			if !json.Valid(line) {
				return nil, false
			}
			raws = append(raws, line)
		}
	}
	objs := make([]map[string]json.RawMessage, len(raws))
	for i, raw := range raws {
		if json.Unmarshal(raw, &objs[i]) != nil {
			objs[i] = nil
		}
	}
	return objs, true
}
