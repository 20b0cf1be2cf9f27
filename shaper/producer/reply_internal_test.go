package producer

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func reply(hdr map[string]string, body string) *nats.Msg {
	m := nats.NewMsg("_INBOX.x")
	for k, v := range hdr {
		m.Header.Set(k, v)
	}
	m.Data = []byte(body)
	return m
}

func TestParseReply(t *testing.T) {
	tests := []struct {
		name    string
		msg     *nats.Msg
		want    Result
		wantErr error
	}{
		{"accepted", reply(map[string]string{"Shaper-Status": "accepted"},
			`{"status":"accepted","downstream":"printer","job_id":"j1","position":7,"eta_seconds":3.5}`),
			Result{Accepted: true, JobID: "j1", Downstream: "printer", Position: 7, ETA: 3500 * time.Millisecond}, nil},
		{"duplicate", reply(map[string]string{"Shaper-Status": "accepted"},
			`{"status":"accepted","downstream":"printer","job_id":"j1","duplicate":true}`),
			Result{Accepted: true, JobID: "j1", Downstream: "printer", Duplicate: true}, nil},
		{"delayed", reply(map[string]string{"Shaper-Status": "accepted"},
			`{"status":"accepted","downstream":"printer","job_id":"j1","position":1,"eta_seconds":60,"not_before":"2030-01-02T03:04:05Z"}`),
			Result{Accepted: true, JobID: "j1", Downstream: "printer", Position: 1, ETA: time.Minute,
				NotBefore: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}, nil},
		{"paused", reply(map[string]string{"Shaper-Status": "accepted"},
			`{"status":"accepted","downstream":"printer","job_id":"j1","position":4,"paused":true}`),
			Result{Accepted: true, JobID: "j1", Downstream: "printer", Position: 4, Paused: true}, nil},
		{"rejected", reply(map[string]string{"Shaper-Status": "rejected", "Shaper-Reason": "queue_full", "Retry-After": "2"},
			`{"status":"rejected","reason":"queue_full","retry_after_seconds":2,"error":"queue printer is full (10/10)"}`),
			Result{Reason: "queue_full", RetryAfter: 2 * time.Second, ErrorText: "queue printer is full (10/10)"}, ErrQueueFull},
		{"headers win", reply(map[string]string{"Shaper-Status": "rejected", "Shaper-Reason": "rate_limited", "Retry-After": "3"},
			`{"status":"accepted","reason":"queue_full","retry_after_seconds":1}`),
			Result{Reason: "rate_limited", RetryAfter: 3 * time.Second}, ErrRateLimited},
		{"headers only", reply(map[string]string{"Shaper-Status": "rejected", "Shaper-Reason": "unavailable"}, ""),
			Result{Reason: "unavailable"}, ErrUnavailable},
		{"body only", reply(nil, `{"status":"rejected","reason":"would_expire","retry_after_seconds":4}`),
			Result{Reason: "would_expire", RetryAfter: 4 * time.Second}, ErrWouldExpire},
		{"unknown reason", reply(map[string]string{"Shaper-Status": "rejected", "Shaper-Reason": "new_reason"}, ""),
			Result{Reason: "new_reason"}, ErrRejected},
		{"bad Retry-After", reply(map[string]string{"Shaper-Status": "rejected", "Shaper-Reason": "queue_full", "Retry-After": "-5"}, "{"),
			Result{Reason: "queue_full"}, ErrQueueFull},
		{"not shaperd", reply(nil, "pong"), Result{}, ErrBadReply},
		{"odd status", reply(map[string]string{"Shaper-Status": "maybe"}, ""), Result{}, ErrBadReply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseReply(tt.msg)
			if got != tt.want {
				t.Errorf("result = %+v\nwant     %+v", got, tt.want)
			}
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestRejectedError(t *testing.T) {
	e := &RejectedError{Result{Reason: "queue_full", RetryAfter: time.Second, ErrorText: "queue printer is full (10/10)"}}
	if got, want := e.Error(), "producer: job rejected: queue_full: queue printer is full (10/10) (retry after 1s)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	for reason, sentinel := range reasonErrs {
		err := error(&RejectedError{Result{Reason: reason}})
		for _, other := range reasonErrs {
			if errors.Is(err, other) != (other == sentinel) {
				t.Errorf("%s: errors.Is(%v) = %v", reason, other, !(other == sentinel))
			}
		}
		if !errors.Is(err, ErrRejected) || errors.Is(err, ErrBadReply) {
			t.Errorf("%s: ErrRejected / ErrBadReply wrong", reason)
		}
	}
	if got := (&RejectedError{}).Error(); got != "producer: job rejected: no reason given" {
		t.Errorf("empty: %q", got)
	}
}

func TestWaits(t *testing.T) {
	const limit = 30 * time.Second
	tests := []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"retry-after, u=0: exactly it", afterWait(2*time.Second, limit, 0), 2 * time.Second},
		{"retry-after, u→1: half again", afterWait(2*time.Second, limit, 0.999999), 2999999 * time.Microsecond},
		{"retry-after near the cap: jitter up to the cap", afterWait(25*time.Second, limit, 0.999999), 29999995 * time.Microsecond},
		{"retry-after at the cap: equal jitter below it, u=0", afterWait(time.Minute, limit, 0), 15 * time.Second},
		{"retry-after above the cap, u→1", afterWait(time.Hour, limit, 0.999999), 29999985 * time.Microsecond},
		{"backoff 0, u=0", backoffWait(0, limit, 0), 50 * time.Millisecond},
		{"backoff 0, u=0.5", backoffWait(0, limit, 0.5), 75 * time.Millisecond},
		{"backoff 3", backoffWait(3, limit, 0), 400 * time.Millisecond},
		{"backoff capped", backoffWait(20, limit, 0), 15 * time.Second},
		{"backoff past 2^63", backoffWait(100, limit, 0), 15 * time.Second},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, tt.got, tt.want)
		}
	}
}

func TestNext(t *testing.T) {
	s := defaultRetry
	tests := []struct {
		name  string
		err   error
		again bool
	}{
		{"accepted", nil, false},
		{"rate limited", &RejectedError{Result{Reason: ReasonRateLimited, RetryAfter: time.Second}}, true},
		{"unavailable without Retry-After", &RejectedError{Result{Reason: ReasonUnavailable}}, true},
		{"bad request", &RejectedError{Result{Reason: ReasonBadRequest}}, false},
		{"unknown reason", &RejectedError{Result{Reason: "new_reason", RetryAfter: time.Second}}, false},
		{"timeout", errors.Join(errors.New("wrapped"), nats.ErrTimeout), true},
		{"no responders", nats.ErrNoResponders, true},
		{"closed", nats.ErrConnectionClosed, false},
		{"bad reply", ErrBadReply, false},
	}
	for _, tt := range tests {
		n := 0
		if _, again := s.next(tt.err, &n, 0); again != tt.again {
			t.Errorf("%s: retry %v, want %v", tt.name, again, tt.again)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	nc := &nats.Conn{}
	tests := []struct {
		name string
		nc   *nats.Conn
		opts []ClientOption
		want string
	}{
		{"nil conn", nil, nil, "needs a *nats.Conn"},
		{"empty prefix", nc, []ClientOption{SubjectPrefix("")}, `subject prefix "" is not a subject prefix`},
		{"wildcard prefix", nc, []ClientOption{SubjectPrefix("jobs.*")}, "is not a subject prefix"},
		{"empty key header", nc, []ClientOption{KeyHeader("")}, `key header "" is not a header name`},
		{"negative timeout", nc, []ClientOption{Timeout(-time.Second)}, "timeout must be positive"},
	}
	for _, tt := range tests {
		if _, err := New(tt.nc, tt.opts...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
	c, err := New(nc, SubjectPrefix("jobs"), KeyHeader("x-tenant"))
	if err != nil || c.prefix != "jobs." || c.keyHeader != "X-Tenant" {
		t.Errorf("New = %+v, %v", c, err)
	}
}
