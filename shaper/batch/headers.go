package batch

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/shaperd/shaper/queue"
)

// The headers of a call, and of a multipart call's parts.
const (
	HeaderBatchID   = "Shaper-Batch-Id"   // new per call; also the call's Idempotency-Key
	HeaderBatchSize = "Shaper-Batch-Size" // jobs in the call
	HeaderJobIDs    = "Shaper-Job-Ids"    // the jobs' ids, comma separated, in body order
	HeaderAttempts  = "Shaper-Attempts"   // the jobs' attempts, comma separated, in body order
	HeaderJobID     = "Shaper-Job-Id"     // a multipart part's job
	HeaderAttempt   = "Shaper-Attempt"    // a multipart part's attempt
)

// Headers are the headers of call id carrying jobs, in body order.
func Headers(id string, jobs []*queue.Job) http.Header {
	var att strings.Builder
	for i, j := range jobs {
		if i > 0 {
			att.WriteByte(',')
		}
		att.WriteString(strconv.Itoa(j.Attempt))
	}
	h := http.Header{}
	h.Set(HeaderBatchID, id)
	h.Set("Idempotency-Key", id)
	h.Set(HeaderBatchSize, strconv.Itoa(len(jobs)))
	h.Set(HeaderJobIDs, joinIDs(jobs))
	h.Set(HeaderAttempts, att.String())
	return h
}
