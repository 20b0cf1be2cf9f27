package daemon

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaper/shaper"
)

var testLimits = intakeLimits{prefix: "shaper.jobs.", keyHeader: "Shaper-Key", maxPayload: 1024}

func TestParseJob(t *testing.T) {
	cases := []struct {
		name       string
		subject    string
		hdr        http.Header
		size       int
		reason     shaper.Reason // "" = accepted
		downstream string
		maxWait    time.Duration
		key, msgID string
	}{
		{name: "plain", subject: "shaper.jobs.printer", size: 10, downstream: "printer"},
		{name: "all headers", subject: "shaper.jobs.printer", size: 1024, downstream: "printer",
			hdr:     http.Header{"Shaper-Key": {"tenant-a"}, "Nats-Msg-Id": {"id-1"}, "Shaper-Max-Wait": {"30s"}},
			maxWait: 30 * time.Second, key: "tenant-a", msgID: "id-1"},
		{name: "empty max wait is absent", subject: "shaper.jobs.printer", downstream: "printer",
			hdr: http.Header{"Shaper-Max-Wait": {""}}},
		{name: "max wait 7 days", subject: "shaper.jobs.printer", downstream: "printer",
			hdr: http.Header{"Shaper-Max-Wait": {"168h"}}, maxWait: 168 * time.Hour},
		{name: "no downstream", subject: "shaper.jobs.", reason: shaper.ReasonUnknownDownstream},
		{name: "other prefix", subject: "other.printer", reason: shaper.ReasonUnknownDownstream},
		{name: "extra token", subject: "shaper.jobs.printer.x", reason: shaper.ReasonUnknownDownstream},
		{name: "payload one over", subject: "shaper.jobs.printer", size: 1025, reason: shaper.ReasonPayloadTooLarge, downstream: "printer"},
		{name: "max wait zero", subject: "shaper.jobs.p", hdr: http.Header{"Shaper-Max-Wait": {"0s"}}, reason: shaper.ReasonBadRequest, downstream: "p"},
		{name: "max wait negative", subject: "shaper.jobs.p", hdr: http.Header{"Shaper-Max-Wait": {"-1h"}}, reason: shaper.ReasonBadRequest, downstream: "p"},
		{name: "max wait huge", subject: "shaper.jobs.p", hdr: http.Header{"Shaper-Max-Wait": {"9999999h"}}, reason: shaper.ReasonBadRequest, downstream: "p"},
		{name: "max wait over 7d", subject: "shaper.jobs.p", hdr: http.Header{"Shaper-Max-Wait": {"168h1ns"}}, reason: shaper.ReasonBadRequest, downstream: "p"},
		{name: "max wait garbage", subject: "shaper.jobs.p", hdr: http.Header{"Shaper-Max-Wait": {"soon"}}, reason: shaper.ReasonBadRequest, downstream: "p"},
		{name: "key twice", subject: "shaper.jobs.p", hdr: http.Header{"Shaper-Key": {"a", "b"}}, reason: shaper.ReasonBadRequest, downstream: "p"},
		{name: "key too long", subject: "shaper.jobs.p", hdr: http.Header{"Shaper-Key": {strings.Repeat("k", 257)}}, reason: shaper.ReasonBadRequest, downstream: "p"},
		{name: "key not utf8", subject: "shaper.jobs.p", hdr: http.Header{"Shaper-Key": {"\xff"}}, reason: shaper.ReasonBadRequest, downstream: "p"},
		{name: "msg id too long", subject: "shaper.jobs.p", hdr: http.Header{"Nats-Msg-Id": {strings.Repeat("i", 257)}}, reason: shaper.ReasonBadRequest, downstream: "p"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hdr := tc.hdr
			if hdr == nil {
				hdr = http.Header{}
			}
			job, msgID, rej := parseJob(time.Now(), testLimits, tc.subject, hdr, make([]byte, tc.size))
			if tc.reason != "" {
				if rej == nil || rej.reason != tc.reason {
					t.Fatalf("rejection %+v, want %s", rej, tc.reason)
				}
				if rej.err == nil || rej.err.Error() == "" {
					t.Fatal("rejection without an explanation")
				}
				if tc.downstream != "" && (job == nil || job.Downstream != tc.downstream) {
					t.Errorf("rejection lost its downstream: %+v", job)
				}
				return
			}
			if rej != nil {
				t.Fatalf("rejected: %s: %v", rej.reason, rej.err)
			}
			if job.Downstream != tc.downstream || job.MaxWait != tc.maxWait || job.Key != tc.key || msgID != tc.msgID || job.Cost != 1 {
				t.Errorf("job %+v msgID %q", job, msgID)
			}
		})
	}
}

func TestPassThroughDropsProtocolHeaders(t *testing.T) {
	hdr := http.Header{
		"Content-Type": {"application/json"}, "Traceparent": {"00-ab"},
		"Shaper-Key": {"k"}, "Shaper-Max-Wait": {"1s"}, "Nats-Msg-Id": {"x"}, "X-Tenant": {"t"},
	}
	got := passThrough(hdr, "X-Tenant")
	if len(got) != 2 || got.Get("Content-Type") == "" || got.Get("Traceparent") == "" {
		t.Errorf("passThrough = %v", got)
	}
	if passThrough(http.Header{"Shaper-Key": {"k"}}, "Shaper-Key") != nil {
		t.Error("no headers to pass should allocate nothing")
	}
}

func TestReplies(t *testing.T) {
	rb := newReplyBuf()
	m := rb.accepted("_INBOX.1", shaper.Receipt{Downstream: "printer", JobID: "abc", Position: 7, ETA: 3500 * time.Millisecond}, false, "")
	var body map[string]any
	if err := json.Unmarshal(m.Data, &body); err != nil {
		t.Fatalf("%s: %v", m.Data, err)
	}
	want := map[string]any{"status": "accepted", "downstream": "printer", "job_id": "abc", "position": 7.0, "eta_seconds": 3.5}
	for k, v := range want {
		if body[k] != v {
			t.Errorf("%s = %v, want %v (%s)", k, body[k], v, m.Data)
		}
	}
	if m.Header.Get(hdrStatus) != "accepted" {
		t.Errorf("headers %v", m.Header)
	}
	m = rb.accepted("_INBOX.2", shaper.Receipt{Downstream: "printer", JobID: "abc"}, true, "started")
	if string(m.Data) != `{"status":"accepted","downstream":"printer","job_id":"abc","duplicate":true,"state":"started"}` || m.Subject != "_INBOX.2" {
		t.Errorf("duplicate reply %s to %s", m.Data, m.Subject)
	}

	r := rejectedReply("_INBOX.3", shaper.ReasonQueueFull, 500*time.Millisecond, errString("queue printer is full (10/10)"))
	if r.Header.Get(hdrRetry) != "1" || r.Header.Get(hdrReason) != "queue_full" || r.Header.Get(hdrStatus) != "rejected" {
		t.Errorf("rejection headers %v", r.Header)
	}
	if string(r.Data) != `{"status":"rejected","reason":"queue_full","retry_after_seconds":1,"error":"queue printer is full (10/10)"}` {
		t.Errorf("rejection body %s", r.Data)
	}
	r = rejectedReply("_INBOX.4", shaper.ReasonBadRequest, time.Second, errString("bad"))
	if r.Header.Get(hdrRetry) != "" {
		t.Error("Retry-After on bad_request: a retry cannot help")
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestRetryAfterSecondsRoundsUp(t *testing.T) {
	for d, want := range map[time.Duration]int64{0: 0, -time.Second: 0, time.Nanosecond: 1, 500 * time.Millisecond: 1,
		time.Second: 1, time.Second + time.Nanosecond: 2, 90 * time.Second: 90} {
		if got := retryAfterSeconds(d); got != want {
			t.Errorf("retryAfterSeconds(%s) = %d, want %d", d, got, want)
		}
	}
}

// FuzzParseJob: no subject, header or payload makes parsing panic, and every
// rejection carries a reason and an explanation.
func FuzzParseJob(f *testing.F) {
	f.Add("shaper.jobs.printer", "tenant", "id", "5m", []byte("x"))
	f.Add("shaper.jobs.", "\xff", "", "-1h", []byte{})
	f.Add("shaper.jobs.a.b", strings.Repeat("k", 300), "x", "9999999h", make([]byte, 2000))
	f.Fuzz(func(t *testing.T, subject, key, id, maxWait string, payload []byte) {
		hdr := http.Header{"Shaper-Key": {key}, "Nats-Msg-Id": {id}, "Shaper-Max-Wait": {maxWait}}
		job, _, rej := parseJob(time.Now(), testLimits, subject, hdr, payload)
		if rej != nil {
			if rej.reason == "" || rej.err == nil {
				t.Fatalf("rejection without reason or error: %+v", rej)
			}
			return
		}
		if job.MaxWait < 0 || job.MaxWait > maxMaxWait || len(job.Payload) > testLimits.maxPayload || job.Downstream == "" {
			t.Fatalf("accepted an out-of-bounds job: %+v", job)
		}
	})
}
