package daemon

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/producer"
)

// Headers of a bulk reply.
const (
	hdrAccepted = producer.HeaderAccepted
	hdrRejected = producer.HeaderRejected
)

// bulkStatus is a bulk request's status: accepted (every job), partial
// (some) or rejected (none).
func bulkStatus(accepted, n int) string {
	switch accepted {
	case n:
		return "accepted"
	case 0:
		return "rejected"
	}
	return "partial"
}

// bulkReply is the reply to a bulk request that could be read: the
// totals, and in the request's order each job's single-job reply body
// with its index. A rejected all-or-nothing request also names, in its
// headers and at the top of its body, the job that failed: its index,
// reason and Retry-After.
func bulkReply(subject, downstream, status string, accepted int, atomic bool, rcs []shaper.Receipt) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Header[hdrStatus] = []string{status}
	m.Header[hdrAccepted] = []string{strconv.Itoa(accepted)}
	m.Header[hdrRejected] = []string{strconv.Itoa(len(rcs) - accepted)}
	b := make([]byte, 0, 96+len(rcs)*96)
	b = append(b, `{"status":"`...)
	b = append(b, status...)
	b = append(b, `","downstream":"`...)
	b = append(b, downstream...) // a configured name: no escaping
	b = append(b, `","accepted":`...)
	b = strconv.AppendInt(b, int64(accepted), 10)
	b = append(b, `,"rejected":`...)
	b = strconv.AppendInt(b, int64(len(rcs)-accepted), 10)
	if atomic && accepted == 0 {
		if i := failedJob(rcs); i >= 0 {
			rc := rcs[i]
			m.Header[hdrReason] = []string{string(rc.Reason)}
			b = append(b, `,"failed_index":`...)
			b = strconv.AppendInt(b, int64(i), 10)
			b = append(b, `,"reason":"`...)
			b = append(b, rc.Reason...)
			b = append(b, '"')
			if secs := retryAfterSeconds(rc.RetryAfter); secs > 0 && retryHelps(rc.Reason) {
				m.Header[hdrRetry] = []string{strconv.FormatInt(secs, 10)}
				b = append(b, `,"retry_after_seconds":`...)
				b = strconv.AppendInt(b, secs, 10)
			}
		}
	}
	b = append(b, `,"jobs":[`...)
	for i, rc := range rcs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJobVerdict(b, i, rc)
	}
	m.Data = append(b, "]}"...)
	return m
}

// failedJob is the index of the job an all-or-nothing request was refused
// for: the one whose error does not point at another job.
func failedJob(rcs []shaper.Receipt) int {
	var nq *shaper.NotQueuedError
	for i, rc := range rcs {
		if !errors.As(rc.Err, &nq) {
			return i
		}
	}
	return -1
}

// appendJobVerdict appends job i's entry: its single-job reply body with
// its index.
func appendJobVerdict(b []byte, i int, rc shaper.Receipt) []byte {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(i), 10)
	if !rc.Accepted {
		b = append(b, `,"status":"rejected","reason":"`...)
		b = append(b, rc.Reason...)
		b = append(b, '"')
		if secs := retryAfterSeconds(rc.RetryAfter); secs > 0 && retryHelps(rc.Reason) {
			b = append(b, `,"retry_after_seconds":`...)
			b = strconv.AppendInt(b, secs, 10)
		}
		if rc.Err != nil {
			msg, _ := json.Marshal(rc.Err.Error())
			b = append(b, `,"error":`...)
			b = append(b, msg...)
		}
		return append(b, '}')
	}
	b = append(b, `,"status":"accepted","job_id":`...)
	id, _ := json.Marshal(rc.JobID) // a producer's id may need escaping
	b = append(b, id...)
	if rc.Duplicate {
		return append(b, `,"duplicate":true}`...)
	}
	b = append(b, `,"position":`...)
	b = strconv.AppendInt(b, int64(rc.Position), 10)
	if rc.Paused {
		b = append(b, `,"paused":true`...)
	} else {
		b = append(b, `,"eta_seconds":`...)
		b = strconv.AppendFloat(b, math.Round(rc.ETA.Seconds()*1000)/1000, 'f', -1, 64)
	}
	if !rc.NotBefore.IsZero() {
		b = append(b, `,"not_before":"`...)
		b = rc.NotBefore.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	return append(b, '}')
}
