package main

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/shaper/producer"
)

func ptr(f float64) *float64 { return &f }

func TestSummarize(t *testing.T) {
	ms := time.Millisecond
	results := []jobResult{
		{Index: 0, Sent: true, SentAt: 0, Status: "accepted", Position: 3, ETA: ptr(1.5)},
		{Index: 1, Sent: true, SentAt: 100 * ms, Status: "accepted", Position: 0, ETA: ptr(0)},
		{Index: 2, Sent: true, SentAt: 200 * ms, Status: "accepted", Duplicate: true, JobID: "j1"},
		{Index: 3, Sent: true, SentAt: 300 * ms, Status: "rejected", Reason: "queue_full", RetryAfter: 1},
		{Index: 4, Sent: true, SentAt: 400 * ms, Status: "rejected", Reason: "rate_limited", RetryAfter: 3},
		{Index: 5, Sent: true, SentAt: 500 * ms, Status: "rejected", Reason: "queue_full", RetryAfter: 1},
		{Index: 6, Sent: true, SentAt: 600 * ms, Status: "rejected", Reason: "bad_request"},
		{Index: 7, Sent: true, SentAt: 700 * ms, Err: "timeout"},
		{Index: 8, Sent: false, Err: "not_sent"},
	}
	o := publishOptions{Downstream: "printer", SubjectPrefix: "shaper.jobs", Rate: 10}
	s := summarize(o, results, 900*ms)
	want := publishSummary{Subject: "shaper.jobs.printer", Jobs: 9, Sent: 8, Accepted: 3, Duplicates: 1, Rejected: 4,
		NoAnswer: 2, TargetRate: 10, WallSeconds: 0.9}
	if s.Subject != want.Subject || s.Jobs != want.Jobs || s.Sent != want.Sent || s.Accepted != want.Accepted ||
		s.Duplicates != want.Duplicates || s.Rejected != want.Rejected || s.NoAnswer != want.NoAnswer {
		t.Errorf("summary = %+v", s)
	}
	if !maps.Equal(s.RejectedBy, map[string]int{"queue_full": 2, "rate_limited": 1, "bad_request": 1}) {
		t.Errorf("RejectedBy = %v", s.RejectedBy)
	}
	if !maps.Equal(s.RetryAfter, map[int]int{1: 2, 3: 1}) {
		t.Errorf("RetryAfter = %v", s.RetryAfter)
	}
	if !maps.Equal(s.NoAnswerBy, map[string]int{"timeout": 1, "not_sent": 1}) {
		t.Errorf("NoAnswerBy = %v", s.NoAnswerBy)
	}
	if *s.Position != (span{0, 3}) || *s.ETA != (span{0, 1.5}) {
		t.Errorf("Position %v, ETA %v", s.Position, s.ETA)
	}
	if s.SendRate < 9.99 || s.SendRate > 10.01 { // 7 gaps over 700 ms
		t.Errorf("SendRate = %v, want 10", s.SendRate)
	}
	var b strings.Builder
	if err := writeSummaryText(&b, s); err != nil {
		t.Fatal(err)
	}
	wantText := `published 8 of 9 jobs to shaper.jobs.printer in 0.900s (send rate 10/s, target 10/s)
  accepted        3  positions 0..3, eta 0s..1.5s
  duplicates      1
  rejected        4  queue_full=2 bad_request=1 rate_limited=1
  retry-after        1s×2 3s×1
  no answer       2  not_sent=1 timeout=1
`
	if b.String() != wantText {
		t.Errorf("text:\n%s\nwant:\n%s", b.String(), wantText)
	}
}

// record turns producer.Submit's answers into per-job results (parsing
// the reply is the producer package's, tested there).
func TestRecord(t *testing.T) {
	rejected := func(res producer.Result) error { return &producer.RejectedError{Result: res} }
	tests := []struct {
		name string
		res  producer.Result
		err  func(producer.Result) error
		want jobResult
	}{
		{"accepted", producer.Result{Accepted: true, Downstream: "printer", JobID: "j7", Position: 7, ETA: 3500 * time.Millisecond}, nil,
			jobResult{Status: "accepted", JobID: "j7", Position: 7, ETA: ptr(3.5)}},
		{"rejected", producer.Result{Reason: "queue_full", RetryAfter: 2 * time.Second, ErrorText: "queue printer is full (10/10)"}, rejected,
			jobResult{Status: "rejected", Reason: "queue_full", RetryAfter: 2, Err: "queue printer is full (10/10)"}},
		{"no reason", producer.Result{}, rejected, jobResult{Status: "rejected", Reason: "unspecified"}},
		{"duplicate", producer.Result{Accepted: true, JobID: "j1", Duplicate: true}, nil,
			jobResult{Status: "accepted", JobID: "j1", Duplicate: true}},
		{"garbage", producer.Result{}, func(producer.Result) error { return fmt.Errorf("%w on x", producer.ErrBadReply) },
			jobResult{Err: "bad_reply"}},
		{"timeout", producer.Result{}, func(producer.Result) error { return fmt.Errorf("no reply: %w", nats.ErrTimeout) },
			jobResult{Err: "timeout"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r jobResult
			var err error
			if tt.err != nil {
				err = tt.err(tt.res)
			}
			record(&r, tt.res, err)
			if (r.ETA == nil) != (tt.want.ETA == nil) || (r.ETA != nil && *r.ETA != *tt.want.ETA) {
				t.Errorf("ETA = %v, want %v", r.ETA, tt.want.ETA)
			}
			r.ETA, tt.want.ETA = nil, nil
			if r != tt.want {
				t.Errorf("got %+v\nwant %+v", r, tt.want)
			}
		})
	}
}

func TestFormatRetryAfterAndCounts(t *testing.T) {
	if got := formatRetryAfter(map[int]int{10: 1, 2: 4}); got != "2s×4 10s×1" {
		t.Errorf("formatRetryAfter = %q", got)
	}
	if got := formatRetryAfter(nil); got != "none" {
		t.Errorf("formatRetryAfter(nil) = %q", got)
	}
	if got := formatCounts(map[string]int{"b": 1, "a": 1, "c": 5}, "="); got != "c=5 a=1 b=1" {
		t.Errorf("formatCounts = %q", got)
	}
	if got := roundRate(3271.069); got != 3271 {
		t.Errorf("roundRate = %v", got)
	}
}

// Jobs accepted while the downstream is paused until resumed carry no eta:
// the summary counts them instead of taking them for "starts now".
func TestSummarizePaused(t *testing.T) {
	results := []jobResult{
		{Index: 0, Sent: true, Status: "accepted", Position: 1, Paused: true},
		{Index: 1, Sent: true, Status: "accepted", Position: 2, Paused: true},
	}
	s := summarize(publishOptions{Downstream: "printer", SubjectPrefix: "shaper.jobs"}, results, time.Second)
	if s.Paused != 2 || s.ETA != nil || *s.Position != (span{1, 2}) {
		t.Errorf("summary of paused jobs: paused %d, eta %v, positions %v; want 2, none, 1..2", s.Paused, s.ETA, s.Position)
	}
	var b strings.Builder
	if err := writeSummaryText(&b, s); err != nil {
		t.Fatal(err)
	}
	if want := "  accepted        2  positions 1..2, 2 while paused (no eta)\n"; !strings.Contains(b.String(), want) {
		t.Errorf("summary text:\n%s\nwant a line %q", b.String(), want)
	}
	r := jobResult{}
	record(&r, producer.Result{Accepted: true, JobID: "j", Position: 3, Paused: true}, nil)
	if !r.Paused || r.ETA != nil || r.Position != 3 {
		t.Errorf("record of a paused reply: %+v", r)
	}
}
