package producer

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func jobAnswer(accepted bool, reason string, retryAfter time.Duration) BulkJobResult {
	return BulkJobResult{Result: Result{Accepted: accepted, Reason: reason, RetryAfter: retryAfter}}
}

// plan sends again the jobs rejected with Retry-After, after the longest
// one, mapping the round's places back to the caller's indexes.
func TestBulkPlan(t *testing.T) {
	round := BulkResult{Jobs: []BulkJobResult{
		jobAnswer(true, "", 0),
		jobAnswer(false, ReasonRateLimited, time.Second),
		jobAnswer(false, ReasonBadRequest, 0),
		jobAnswer(false, ReasonQueueFull, 3*time.Second),
		jobAnswer(false, ReasonUnavailable, 0), // retryable, but no Retry-After: not sent again
	}}
	pending := []int{2, 5, 6, 8, 9}
	tests := []struct {
		name   string
		atomic bool
		round  BulkResult
		err    error
		next   []int
		wait   time.Duration // with u = 0: no jitter
		want   error
	}{
		{"per job", false, round, nil, []int{5, 8}, 3 * time.Second, ErrQueueFull},
		{"atomic, a final reason", true, round, nil, nil, 0, nil},
		{"atomic", true, BulkResult{Jobs: []BulkJobResult{jobAnswer(false, ReasonRateLimited, 2*time.Second),
			jobAnswer(false, "", 0), jobAnswer(false, "", 0), jobAnswer(false, "", 0), jobAnswer(false, "", 0)}},
			nil, pending, 2 * time.Second, ErrRateLimited},
		{"all accepted", false, BulkResult{Jobs: []BulkJobResult{jobAnswer(true, "", 0)}}, nil, nil, 0, nil},
		{"rejected whole, Retry-After", false, BulkResult{},
			&RejectedError{Result{Reason: ReasonUnavailable, RetryAfter: time.Second}}, pending, time.Second, ErrUnavailable},
		{"rejected whole, final", false, BulkResult{}, &RejectedError{Result{Reason: ReasonPayloadTooLarge}}, nil, 0, nil},
		{"no responders", false, BulkResult{}, nats.ErrNoResponders, pending, 50 * time.Millisecond, nats.ErrNoResponders},
		{"bad reply", false, BulkResult{}, ErrBadReply, nil, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &bulkRequest{atomic: tt.atomic, retry: defaultRetry, objs: make([][]byte, 10)}
			backoffs := 0
			p := r.plan(tt.round, tt.err, pending, &backoffs, 0)
			if !slices.Equal(p.next, tt.next) || p.wait != tt.wait || (tt.want != nil && !errors.Is(p.why, tt.want)) {
				t.Errorf("plan = %+v, want next %v after %s, why matching %v", p, tt.next, tt.wait, tt.want)
			}
		})
	}
}

// merge puts a retry's answers in their jobs' places and counts again.
func TestBulkMerge(t *testing.T) {
	r := &bulkRequest{objs: make([][]byte, 3)}
	first := BulkResult{Status: BulkPartial, Downstream: "printer", Accepted: 1, Rejected: 2, Jobs: []BulkJobResult{
		{Index: 0, Result: Result{Accepted: true, JobID: "a"}},
		{Index: 1, Result: Result{Reason: ReasonRateLimited, RetryAfter: time.Second}},
		{Index: 2, Result: Result{Reason: ReasonQueueFull, RetryAfter: time.Second}},
	}}
	res := r.merge(BulkResult{}, first, nil, []int{0, 1, 2})
	if res.Status != BulkPartial || len(res.Jobs) != 3 {
		t.Fatalf("first answer: %+v", res)
	}
	again := BulkResult{Status: BulkPartial, Jobs: []BulkJobResult{
		{Index: 0, Result: Result{Reason: ReasonRateLimited, RetryAfter: time.Second}},
		{Index: 1, Result: Result{Accepted: true, JobID: "c"}},
	}}
	res = r.merge(res, again, nil, []int{1, 2})
	if res.Status != BulkPartial || res.Accepted != 2 || res.Rejected != 1 || res.Jobs[2].JobID != "c" || res.Jobs[2].Index != 2 ||
		res.Jobs[1].Index != 1 || res.Jobs[1].Accepted {
		t.Errorf("merged: %+v", res)
	}
	res = r.merge(res, BulkResult{Jobs: []BulkJobResult{{Result: Result{Accepted: true, JobID: "b"}}}}, nil, []int{1})
	if res.Status != BulkAccepted || res.Accepted != 3 || res.Rejected != 0 || res.Downstream != "printer" {
		t.Errorf("all accepted: %+v", res)
	}
	if kept := r.merge(res, BulkResult{}, nats.ErrTimeout, []int{1}); kept.Accepted != 3 || len(kept.Jobs) != 3 {
		t.Errorf("a failed request changed the answers: %+v", kept)
	}
}
