package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/shaper/outcome"
	"github.com/shaperd/shaper/shaper/producer"
)

// fakeOutcomes is a stand-in for shaperd's side of "what became of a job"
// on downstream pay: it accepts every job (a repeated Nats-Msg-Id as a
// duplicate with the first job's id and state, payload "reject" as
// queue_full), starts it at once and ends it: payload "fail" as failed
// with a 500, any other as succeeded with a 201 and a JSON receipt. It
// publishes the outcome on the job's Shaper-Reply-To unless lose is set,
// and answers status look-ups on <statusPrefix>.pay.<id> from its
// records. With hold, jobs stay started until finish.
type fakeOutcomes struct {
	nc   *nats.Conn
	hold bool
	lose bool

	mu      sync.Mutex
	jobs    int
	records map[string]*outcome.Record
	msgIDs  map[string]string // Nats-Msg-Id → job id
	replyTo map[string]string // job id → Shaper-Reply-To
	payload map[string]string // job id → payload
	lookups int
}

func startFakeOutcomes(t *testing.T, url, statusPrefix string, hold, lose bool) *fakeOutcomes {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	f := &fakeOutcomes{nc: nc, hold: hold, lose: lose, records: map[string]*outcome.Record{},
		msgIDs: map[string]string{}, replyTo: map[string]string{}, payload: map[string]string{}}
	if _, err := nc.Subscribe("shaper.jobs.pay", f.job); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Subscribe(statusPrefix+".pay.*", f.status); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fakeOutcomes) job(m *nats.Msg) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if string(m.Data) == "reject" {
		respond(m, map[string]string{"Shaper-Status": "rejected", "Shaper-Reason": "queue_full", "Retry-After": "1"},
			map[string]any{"status": "rejected", "reason": "queue_full", "retry_after_seconds": 1, "error": "queue pay is full (1/1)"})
		return
	}
	if first := f.msgIDs[m.Header.Get("Nats-Msg-Id")]; first != "" {
		respond(m, map[string]string{"Shaper-Status": "accepted"}, map[string]any{"status": "accepted", "downstream": "pay",
			"job_id": first, "duplicate": true, "state": f.records[first].State})
		return
	}
	f.jobs++
	id := fmt.Sprintf("job-%d", f.jobs)
	if msgID := m.Header.Get("Nats-Msg-Id"); msgID != "" {
		f.msgIDs[msgID] = id
	}
	now := time.Now()
	f.records[id] = &outcome.Record{JobID: id, Downstream: "pay", State: outcome.Started, Attempts: 1, AcceptedAt: now, StartedAt: now}
	f.replyTo[id], f.payload[id] = m.Header.Get("Shaper-Reply-To"), string(m.Data)
	respond(m, map[string]string{"Shaper-Status": "accepted"},
		map[string]any{"status": "accepted", "downstream": "pay", "job_id": id, "position": 1, "eta_seconds": 0})
	if !f.hold {
		f.end(id)
	}
}

// end ends job id as its payload says and publishes its outcome; f.mu is
// held.
func (f *fakeOutcomes) end(id string) {
	rec := f.records[id]
	rec.EndedAt = time.Now()
	rec.State = outcome.Succeeded
	rec.Result = &outcome.Result{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"},
		Body: []byte(`{"receipt":"` + id + `"}`)}
	if f.payload[id] == "fail" {
		rec.State, rec.Error = outcome.Failed, "downstream answered 500 Internal Server Error"
		rec.Result = &outcome.Result{StatusCode: 500, Headers: map[string]string{"Content-Type": "text/plain"}, Body: []byte("boom")}
	}
	rec.Result.Bytes = len(rec.Result.Body)
	if f.lose || f.replyTo[id] == "" {
		return
	}
	m := nats.NewMsg(f.replyTo[id])
	m.Data = rec.Result.Body
	m.Header.Set("Shaper-Job-Id", id)
	m.Header.Set("Shaper-State", string(rec.State))
	m.Header.Set("Shaper-Attempt", "1")
	m.Header.Set("Shaper-Status-Code", fmt.Sprint(rec.Result.StatusCode))
	m.Header.Set("Content-Type", rec.Result.ContentType())
	if rec.Error != "" {
		m.Header.Set("Shaper-Error", rec.Error)
	}
	_ = f.nc.PublishMsg(m)
}

// finish ends a held job.
func (f *fakeOutcomes) finish(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.end(id)
}

func (f *fakeOutcomes) status(m *nats.Msg) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookups++
	id := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	rec, ok := f.records[id]
	if !ok {
		respond(m, map[string]string{"Shaper-State": "unknown"}, map[string]any{"job_id": id, "state": "unknown"})
		return
	}
	respond(m, map[string]string{"Shaper-State": string(rec.State)}, rec)
}

func (f *fakeOutcomes) lookupCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lookups
}

func respond(m *nats.Msg, hdr map[string]string, body any) {
	r := nats.NewMsg(m.Reply)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	r.Data, _ = json.Marshal(body)
	_ = m.RespondMsg(r)
}

func TestSubmitAndWaitOutcome(t *testing.T) {
	nc := runNATS(t)
	f := startFakeOutcomes(t, nc.ConnectedUrl(), "shaper.status", false, false)
	o, err := producer.SubmitAndWait(t.Context(), nc, "pay", []byte("order 1"), producer.ReplyTo("ignored.subject"))
	switch {
	case err != nil:
		t.Fatalf("SubmitAndWait: %v", err)
	case !o.Accepted.Accepted || o.JobID != "job-1" || o.Accepted.JobID != "job-1":
		t.Fatalf("accept: %+v", o)
	case o.State != outcome.Succeeded || o.Attempt != 1 || o.StatusCode != 201 || o.Error != "" ||
		o.ContentType != "application/json" || string(o.Body) != `{"receipt":"job-1"}`:
		t.Fatalf("outcome: %+v (body %s)", o, o.Body)
	case o.Record != nil:
		t.Errorf("Record %+v, want nil: the outcome came on Shaper-Reply-To", o.Record)
	case o.Latency <= 0 || o.EndedAt.Before(o.SentAt):
		t.Errorf("latency %s from %s to %s", o.Latency, o.SentAt, o.EndedAt)
	}
	if rt := f.replyTo["job-1"]; !strings.HasSuffix(rt, ".outcome") || rt == "ignored.subject" {
		t.Errorf("Shaper-Reply-To %q, want SubmitAndWait's inbox", rt)
	}

	o, err = producer.SubmitAndWait(t.Context(), nc, "pay", []byte("fail"))
	if err != nil || o.State != outcome.Failed || o.StatusCode != 500 || string(o.Body) != "boom" ||
		o.ContentType != "text/plain" || !strings.Contains(o.Error, "500") {
		t.Fatalf("failed job: %+v, %v", o, err)
	}

	o, err = producer.SubmitAndWait(t.Context(), nc, "pay", []byte("reject"))
	if !errors.Is(err, producer.ErrQueueFull) || o.Accepted.Reason != producer.ReasonQueueFull || o.State != "" {
		t.Fatalf("rejected job: %+v, %v; want ErrQueueFull and the Result", o, err)
	}
	if n := f.lookupCount(); n != 0 {
		t.Errorf("%d status look-ups; want none when the outcome comes at once", n)
	}
}

// A duplicate's outcome goes to the first job's Shaper-Reply-To:
// SubmitAndWait finds it with Status, polling while the job runs.
func TestSubmitAndWaitDuplicate(t *testing.T) {
	nc := runNATS(t)
	f := startFakeOutcomes(t, nc.ConnectedUrl(), "shaper.status", true, false)
	res, err := producer.Submit(t.Context(), nc, "pay", []byte("order 2"), producer.MsgID("order-2"))
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		o   producer.Outcome
		err error
	}
	done := make(chan answer, 1)
	go func() {
		o, err := producer.SubmitAndWait(t.Context(), nc, "pay", []byte("order 2"), producer.MsgID("order-2"))
		done <- answer{o, err}
	}()
	waitFor(t, "the duplicate's first look-up", func() bool { return f.lookupCount() >= 1 })
	f.finish(res.JobID)
	a := <-done
	switch {
	case a.err != nil:
		t.Fatalf("SubmitAndWait: %v", a.err)
	case !a.o.Accepted.Duplicate || a.o.Accepted.State != outcome.Started || a.o.JobID != res.JobID:
		t.Fatalf("accept %+v; want a duplicate of %s, started", a.o.Accepted, res.JobID)
	case a.o.State != outcome.Succeeded || a.o.Record == nil || a.o.Record.State != outcome.Succeeded ||
		a.o.StatusCode != 201 || a.o.ContentType != "application/json" || string(a.o.Body) != `{"receipt":"job-1"}`:
		t.Fatalf("outcome %+v (record %+v); want succeeded from the record", a.o, a.o.Record)
	case a.o.Latency != a.o.Record.EndedAt.Sub(a.o.Record.AcceptedAt):
		t.Errorf("latency %s, want the record's ended_at − accepted_at", a.o.Latency)
	}
	if n := f.lookupCount(); n < 2 {
		t.Errorf("%d look-ups; want one at once and more until the job ended", n)
	}
}

// An outcome that never comes (lost) is found by a status look-up.
func TestSubmitAndWaitLostOutcome(t *testing.T) {
	nc := runNATS(t)
	startFakeOutcomes(t, nc.ConnectedUrl(), "shaper.status", false, true)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	start := time.Now()
	o, err := producer.SubmitAndWait(ctx, nc, "pay", []byte("order 3"))
	if err != nil || o.State != outcome.Succeeded || o.Record == nil || o.StatusCode != 201 || string(o.Body) != `{"receipt":"job-1"}` {
		t.Fatalf("lost outcome: %+v, %v; want succeeded from a look-up", o, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("found after %s; the first look-up is due within 1s", d)
	}
}

func TestSubmitAndWaitContext(t *testing.T) {
	nc := runNATS(t)
	startFakeOutcomes(t, nc.ConnectedUrl(), "shaper.status", true, false)
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	o, err := producer.SubmitAndWait(ctx, nc, "pay", []byte("order 4"))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "job-1") {
		t.Fatalf("err = %v; want context.DeadlineExceeded naming job-1", err)
	}
	if !o.Accepted.Accepted || o.JobID != "job-1" || o.State != outcome.Started {
		t.Errorf("outcome %+v; want the accept and the last state seen (started)", o)
	}
	t.Log(err)

	// No daemon on the subject: no responders, at once.
	_, err = producer.SubmitAndWait(t.Context(), nc, "nobody", nil)
	if !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("no daemon: %v, want nats.ErrNoResponders", err)
	}
}

func TestStatus(t *testing.T) {
	nc := runNATS(t)
	f := startFakeOutcomes(t, nc.ConnectedUrl(), "custom.status", false, true)
	c, err := producer.New(nc, producer.StatusPrefix("custom.status"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(t.Context(), "pay", []byte("fail")); err != nil {
		t.Fatal(err)
	}
	rec, err := c.Status(t.Context(), "pay", "job-1")
	if err != nil || rec.State != outcome.Failed || rec.JobID != "job-1" || rec.Result == nil || rec.Result.StatusCode != 500 ||
		string(rec.Result.Body) != "boom" || rec.EndedAt.IsZero() {
		t.Fatalf("Status: %+v, %v", rec, err)
	}
	rec, err = producer.Status(t.Context(), nc, "pay", "job-9", producer.StatusPrefix("custom.status"))
	if err != nil || rec.State != outcome.Unknown || rec.JobID != "job-9" || rec.Downstream != "pay" {
		t.Fatalf("unknown job: %+v, %v; want state unknown and no error", rec, err)
	}
	if f.lookupCount() != 2 {
		t.Errorf("%d look-ups reached the daemon, want 2", f.lookupCount())
	}
	if _, err := producer.Status(t.Context(), nc, "pay", "job-1"); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("default prefix, nobody there: %v, want nats.ErrNoResponders", err)
	}
	for _, id := range []string{"", "a.b", "a*", "a b"} {
		if _, err := c.Status(t.Context(), "pay", id); err == nil || !strings.Contains(err.Error(), "not a job id") {
			t.Errorf("job id %q: %v", id, err)
		}
	}
	if _, err := producer.New(nc, producer.StatusPrefix("a.>")); err == nil || !strings.Contains(err.Error(), "status prefix") {
		t.Errorf("bad status prefix: %v", err)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 10s", what)
		}
	}
}
