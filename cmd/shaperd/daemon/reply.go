package daemon

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/shaper"
)

// rejectedBody is the JSON body of a rejection: status, reason and, where
// they apply, retry_after_seconds and error. Accepted replies are built by
// replyBuf.
type rejectedBody struct {
	Status            string `json:"status"`
	Reason            string `json:"reason"`
	RetryAfterSeconds int64  `json:"retry_after_seconds,omitempty"`
	Error             string `json:"error,omitempty"`
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
	case shaper.ReasonRateLimited, shaper.ReasonQueueFull, shaper.ReasonUnavailable, shaper.ReasonWouldExpire:
		return true
	}
	return false
}

// replyBuf builds accepted replies into one reused message. Accepted
// replies are the hot path; their fields (a config-bounded downstream name,
// a nuid job id, numbers) need no JSON escaping, so the body is appended by
// hand. Not safe for concurrent use: intake's handler is serial, and
// PublishMsg copies the message before returning.
type replyBuf struct {
	msg nats.Msg
}

func newReplyBuf() *replyBuf {
	return &replyBuf{msg: nats.Msg{Header: nats.Header{}, Data: make([]byte, 0, 256)}}
}

// accepted fills the reused message with the reply for an accepted (or
// duplicate) job and returns it; it is valid until the next call.
func (r *replyBuf) accepted(subject string, rc shaper.Receipt, duplicate bool, state string) *nats.Msg {
	m := &r.msg
	m.Subject = subject
	clear(m.Header)
	m.Header[hdrStatus] = []string{"accepted"}
	b := append(m.Data[:0], `{"status":"accepted","downstream":"`...)
	b = append(b, rc.Downstream...)
	b = append(b, `","job_id":"`...)
	b = append(b, rc.JobID...)
	b = append(b, '"')
	if duplicate {
		b = append(b, `,"duplicate":true`...)
		if state != "" { // a state is one of outcome.States: no escaping
			b = append(b, `,"state":"`...)
			b = append(b, state...)
			b = append(b, '"')
		}
	} else {
		b = append(b, `,"position":`...)
		b = strconv.AppendInt(b, int64(rc.Position), 10)
		if rc.Paused { // paused until resumed: no start is scheduled, no eta
			b = append(b, `,"paused":true`...)
		} else {
			b = append(b, `,"eta_seconds":`...)
			b = strconv.AppendFloat(b, math.Round(rc.ETA.Seconds()*1000)/1000, 'f', -1, 64)
		}
		if !rc.NotBefore.IsZero() { // a delayed job: its instant, to the nanosecond
			b = append(b, `,"not_before":"`...)
			b = rc.NotBefore.UTC().AppendFormat(b, time.RFC3339Nano)
			b = append(b, '"')
		}
	}
	m.Data = append(b, '}')
	return m
}

// rejectedReply builds the reply for a rejection.
func rejectedReply(subject string, reason shaper.Reason, retryAfter time.Duration, err error) *nats.Msg {
	body := rejectedBody{Status: "rejected", Reason: string(reason)}
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
