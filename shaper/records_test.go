package shaper

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/outcome"
)

// tellRec is an outcome.Teller that records what it was told.
type tellRec struct {
	mu       sync.Mutex
	events   []outcome.Record
	outcomes map[string]outcome.Record // by subject
}

func (t *tellRec) Event(rec *outcome.Record) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.events = append(t.events, *rec)
	return nil
}

func (t *tellRec) Outcome(subject string, rec *outcome.Record) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.outcomes == nil {
		t.outcomes = map[string]outcome.Record{}
	}
	t.outcomes[subject] = *rec
	return nil
}

// states returns the states told of job id, in order.
func (t *tellRec) states(id string) []outcome.State {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []outcome.State
	for _, e := range t.events {
		if e.JobID == id {
			out = append(out, e.State)
		}
	}
	return out
}

func (t *tellRec) outcome(subject string) (outcome.Record, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.outcomes[subject]
	return r, ok
}

// answerSink fails each job's first try with a 500 and answers the
// second with a 201 and a body.
type answerSink struct {
	noBatches
	failAll bool
}

func (s answerSink) Deliver(_ context.Context, job *queue.Job) (Feedback, error) {
	if job.Attempt == 1 || s.failAll {
		return Feedback{Result: &outcome.Result{StatusCode: 500, Body: []byte("busy"), Bytes: 4}}, errors.New("POST x: 500")
	}
	return Feedback{Result: &outcome.Result{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"},
		Body: []byte(`{"auth":"A1"}`), Bytes: 13}}, nil
}

// recordsHarness runs a shaper with one memory lane, "pay", that keeps
// records and tells events, over sink.
func recordsHarness(t *testing.T, sink Sink, attempts int) (*Shaper, *tellRec, *recDL, func()) {
	t.Helper()
	tell := &tellRec{}
	dl := &recDL{}
	book := outcome.NewBook(outcome.NewMemory(nil), nil, tell, outcome.Observer{}, nil, func() time.Duration { return time.Second })
	cfg := laneCfg("pay", 1000, 10)
	cfg.Retry = RetryPolicy{MaxAttempts: attempts, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}
	cfg.Outcomes = OutcomeSettings{Keep: time.Hour, Events: true}
	sh, err := New(Settings{Lanes: []LaneSettings{cfg}}, Deps{
		Sinks:      func(LaneSettings) (Sink, error) { return sink, nil },
		DeadLetter: dl, Outcomes: book,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sh.Run(ctx) }()
	<-sh.Ready()
	return sh, tell, dl, func() { cancel(); <-done }
}

// waitRecord polls job id's record until it is in state want.
func waitRecord(t *testing.T, sh *Shaper, id string, want outcome.State) outcome.Record {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec, ok, shared, err := sh.Job(context.Background(), "pay", id)
		if err != nil || shared {
			t.Fatalf("Job: %v (shared %v)", err, shared)
		}
		if ok && rec.State == want {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("record of %s: %+v (found %v), want state %s", id, rec, ok, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRecordFollowsAJobToItsAnswer(t *testing.T) {
	sh, tell, _, stop := recordsHarness(t, answerSink{}, 3)
	defer stop()
	rc := sh.Submit(&queue.Job{Downstream: "pay", Payload: []byte("charge"), ReplyTo: "inbox.1"})
	if !rc.Accepted {
		t.Fatalf("not accepted: %+v", rc)
	}
	rec := waitRecord(t, sh, rc.JobID, outcome.Succeeded)
	if rec.Attempts != 2 || rec.Result == nil || rec.Result.StatusCode != 201 || string(rec.Result.Body) != `{"auth":"A1"}` ||
		rec.AcceptedAt.IsZero() || rec.StartedAt.IsZero() || rec.EndedAt.Before(rec.StartedAt) {
		t.Fatalf("record = %+v (result %+v)", rec, rec.Result)
	}
	want := []outcome.State{outcome.Queued, outcome.Started, outcome.Retrying, outcome.Started, outcome.Succeeded}
	if got := tell.states(rc.JobID); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	out, ok := tell.outcome("inbox.1")
	if !ok || out.State != outcome.Succeeded || out.Result.ContentType() != "application/json" {
		t.Fatalf("outcome on inbox.1 = %+v (%v)", out, ok)
	}
	if _, ok, _, _ := sh.Job(context.Background(), "pay", "never-seen"); ok {
		t.Fatal("an id never seen has a record")
	}
	if latest := sh.LatestJobs("pay"); len(latest) != 1 || latest[0].JobID != rc.JobID {
		t.Fatalf("LatestJobs = %+v", latest)
	}
}

func TestRecordOfAFailedJobNamesItsDeadLetter(t *testing.T) {
	sh, tell, dl, stop := recordsHarness(t, answerSink{failAll: true}, 2)
	defer stop()
	rc := sh.Submit(&queue.Job{Downstream: "pay", Payload: []byte("charge"), ReplyTo: "inbox.2"})
	rec := waitRecord(t, sh, rc.JobID, outcome.Failed)
	if rec.Error == "" || rec.DeadLetterSeq != uint64(len(dl.list())) || rec.DeadLetterSeq == 0 || rec.Result == nil || rec.Result.StatusCode != 500 {
		t.Fatalf("record = %+v", rec)
	}
	out, ok := tell.outcome("inbox.2")
	if !ok || out.State != outcome.Failed || out.Error == "" {
		t.Fatalf("outcome = %+v (%v)", out, ok)
	}
}

func TestNoRecordsWithoutKeep(t *testing.T) {
	h := start(t, Settings{Lanes: []LaneSettings{laneCfg("a", 10, 1)}}, map[string]Sink{"a": newRecSink(nil)})
	defer h.stop()
	if _, _, _, err := h.sh.Job(context.Background(), "a", "x"); !errors.Is(err, ErrNoRecords) {
		t.Fatalf("Job without records: %v, want ErrNoRecords", err)
	}
	if _, _, _, err := h.sh.Job(context.Background(), "nope", "x"); !errors.Is(err, ErrUnknownDownstream) {
		t.Fatalf("Job of an unknown downstream: %v", err)
	}
}
