package daemon

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/shaper"
)

// replyBody is the JSON body of a reply (SPEC.md, "Subjects and the job protocol").
type replyBody struct {
	Status            string   `json:"status"`
	Downstream        string   `json:"downstream,omitempty"`
	JobID             string   `json:"job_id,omitempty"`
	Duplicate         bool     `json:"duplicate,omitempty"`
	Position          int      `json:"position,omitempty"`
	ETASeconds        *float64 `json:"eta_seconds,omitempty"`
	Reason            string   `json:"reason,omitempty"`
	RetryAfterSeconds int64    `json:"retry_after_seconds,omitempty"`
	Error             string   `json:"error,omitempty"`
}

// retryAfterSeconds rounds a wait up to whole seconds for Retry-After, so a
// client that obeys it is never early. A positive wait is at least 1.
func retryAfterSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(math.Ceil(d.Seconds()))
}

// retryHelps reports whether a Retry-After belongs on a rejection: only when
// waiting can change the answer.
func retryHelps(r shaper.Reason) bool {
	switch r {
	case shaper.ReasonRateLimited, shaper.ReasonQueueFull, shaper.ReasonUnavailable:
		return true
	}
	return false
}

// acceptedReply builds the reply for an accepted (or duplicate) job.
func acceptedReply(subject string, rc shaper.Receipt, duplicate bool) *nats.Msg {
	body := replyBody{
		Status:     "accepted",
		Downstream: rc.Downstream,
		JobID:      rc.JobID,
		Duplicate:  duplicate,
	}
	if !duplicate {
		eta := math.Round(rc.ETA.Seconds()*1000) / 1000
		body.Position = rc.Position
		body.ETASeconds = &eta
	}
	m := nats.NewMsg(subject)
	m.Header.Set(hdrStatus, "accepted")
	m.Data, _ = json.Marshal(body) // cannot fail: plain struct
	return m
}

// rejectedReply builds the reply for a rejection.
func rejectedReply(subject string, reason shaper.Reason, retryAfter time.Duration, err error) *nats.Msg {
	body := replyBody{Status: "rejected", Reason: string(reason)}
	if err != nil {
		body.Error = err.Error()
	}
	m := nats.NewMsg(subject)
	m.Header.Set(hdrStatus, "rejected")
	m.Header.Set(hdrReason, string(reason))
	if secs := retryAfterSeconds(retryAfter); secs > 0 && retryHelps(reason) {
		body.RetryAfterSeconds = secs
		m.Header.Set(hdrRetry, strconv.FormatInt(secs, 10))
	}
	m.Data, _ = json.Marshal(body)
	return m
}
