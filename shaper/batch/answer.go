package batch

import (
	"bytes"
	"encoding/json"
)

// Failure is a job a 2xx answer names as failed.
type Failure struct {
	JobID string `json:"job_id"`
	Error string `json:"error"`
	// Retry: the job is tried again with backoff (an attempt each);
	// false fails it for good (dead-lettered). An answer that does not
	// say is a retry.
	Retry bool `json:"retry"`
}

// entry is one element of a 2xx body's "failed" list.
type entry struct {
	JobID string `json:"job_id"`
	Error string `json:"error"`
	Retry *bool  `json:"retry"`
}

// ParseAnswer returns the jobs of a call that body, a 2xx answer's, names
// as failed, by job id; every job not named succeeded. A body that is not
// a JSON object with a "failed" key names none. malformed counts what of
// the "failed" value could not be read: 1 for a value that is not a list
// of objects, else the entries that name no job; those are ignored. A job
// named twice keeps its first entry.
func ParseAnswer(body []byte) (failed map[string]Failure, malformed int) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil, 0
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return nil, 0
	}
	raw, ok := top["failed"]
	if !ok {
		return nil, 0
	}
	var list []entry
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, 1
	}
	for _, f := range list {
		if f.JobID == "" {
			malformed++
			continue
		}
		if failed == nil {
			failed = make(map[string]Failure, len(list))
		}
		if _, ok := failed[f.JobID]; ok {
			continue
		}
		failed[f.JobID] = Failure{JobID: f.JobID, Error: f.Error, Retry: f.Retry == nil || *f.Retry}
	}
	return failed, malformed
}
