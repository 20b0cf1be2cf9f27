package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// jobRecord is the part of a job's record the tests read.
type jobRecord struct {
	JobID         string `json:"job_id"`
	State         string `json:"state"`
	Attempts      int    `json:"attempts"`
	Error         string `json:"error"`
	DeadLetterSeq uint64 `json:"dead_letter_seq"`
	AcceptedAt    string `json:"accepted_at"`
	EndedAt       string `json:"ended_at"`
	Result        *struct {
		StatusCode int               `json:"status_code"`
		Headers    map[string]string `json:"headers"`
		Body       []byte            `json:"body_base64"`
		Bytes      int               `json:"bytes"`
	} `json:"result"`
}

// gateway is a downstream that answers like a payment gateway: 201 with
// an authorization as JSON, or 500 while failing is set.
func gateway(t *testing.T, failing *atomic.Bool) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing != nil && failing.Load() {
			http.Error(w, "card declined", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/auth/"+r.Header.Get("Shaper-Job-Id"))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"authorization":"AUTH-%s"}`, r.Header.Get("Shaper-Job-Id"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// outcomesLane is the "pay" downstream on backend, keeping records for
// keep, with events, delivering to url.
func outcomesLane(backend, keep, url string) string {
	return fmt.Sprintf(`
  pay:
    rate: 50/s
    queue: { capacity: 100, backend: %s }
    sink: { http: { url: %q, timeout: 2s } }
    retry: { max_attempts: 2, initial_backoff: 10ms, max_backoff: 10ms }
    dead_letter: shaper.dead.pay
    outcomes: { keep: %s, result_bytes: 1KiB, events: true }
`, backend, url, keep)
}

// status asks for job id's record by NATS.
func status(t *testing.T, nc *nats.Conn, id string) (jobRecord, nats.Header) {
	t.Helper()
	m, err := nc.Request("shaper.status.pay."+id, nil, 5*time.Second)
	if err != nil {
		t.Fatalf("status request: %v", err)
	}
	var r jobRecord
	if err := json.Unmarshal(m.Data, &r); err != nil {
		t.Fatalf("status body %q: %v", m.Data, err)
	}
	return r, m.Header
}

// sendWaiting sends a job by request with Shaper-Reply-To set to a new
// inbox and returns the accept reply and the inbox's subscription.
func sendWaiting(t *testing.T, in *instance, payload string) (reply, *nats.Subscription) {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := in.nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	r := in.request(t, "shaper.jobs.pay", []byte(payload), map[string]string{"Shaper-Reply-To": inbox})
	if r.Status != "accepted" {
		t.Fatalf("not accepted: %s", r.Body)
	}
	return r, sub
}

// TestOutcomeReachesTheProducer: on both backends, a producer that sent
// Shaper-Reply-To gets the downstream's answer; the record is there by
// NATS and by the admin API; the events came in order; an id never seen
// is unknown; a failing job ends failed with its error everywhere.
func TestOutcomeReachesTheProducer(t *testing.T) {
	for _, backend := range []string{"memory", "jetstream"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			srv := runNATS(t)
			var failing atomic.Bool
			gw := gateway(t, &failing)
			in := startDaemon(t, srv, baseConfig(outcomesLane(backend, "1h", gw.URL)))
			events, err := in.nc.SubscribeSync("shaper.events.pay.*")
			if err != nil {
				t.Fatal(err)
			}
			r, sub := sendWaiting(t, in, `{"amount":10}`)
			out, err := sub.NextMsg(10 * time.Second)
			if err != nil {
				t.Fatalf("no outcome: %v", err)
			}
			want := fmt.Sprintf(`{"authorization":"AUTH-%s"}`, r.JobID)
			if string(out.Data) != want || out.Header.Get("Shaper-State") != "succeeded" ||
				out.Header.Get("Shaper-Status-Code") != "201" || out.Header.Get("Content-Type") != "application/json" ||
				out.Header.Get("Shaper-Job-Id") != r.JobID || out.Header.Get("Shaper-Attempt") != "1" {
				t.Fatalf("outcome %q headers %v", out.Data, out.Header)
			}
			rec, hdr := status(t, in.nc, r.JobID)
			if rec.State != "succeeded" || hdr.Get("Shaper-State") != "succeeded" || rec.Result == nil ||
				rec.Result.StatusCode != 201 || string(rec.Result.Body) != want || rec.Result.Headers["Location"] != "/auth/"+r.JobID {
				t.Fatalf("record %+v", rec)
			}
			var api jobRecord
			if err := json.Unmarshal([]byte(in.get(t, "/v1/downstreams/pay/jobs/"+r.JobID, 200)), &api); err != nil || api.State != "succeeded" {
				t.Fatalf("admin record %+v: %v", api, err)
			}
			var got []string
			for len(got) < 3 {
				m, err := events.NextMsg(10 * time.Second)
				if err != nil {
					t.Fatalf("events so far %v: %v", got, err)
				}
				if m.Header.Get("Shaper-Job-Id") == r.JobID {
					got = append(got, m.Header.Get("Shaper-State"))
				}
			}
			if !slices.Equal(got, []string{"queued", "started", "succeeded"}) {
				t.Fatalf("events %v", got)
			}
			if rec, hdr := status(t, in.nc, "no-such-job"); rec.State != "unknown" || hdr.Get("Shaper-State") != "unknown" {
				t.Fatalf("unknown id: %+v", rec)
			}
			in.get(t, "/v1/downstreams/pay/jobs/no-such-job", 404)

			failing.Store(true)
			r, sub = sendWaiting(t, in, `{"amount":20}`)
			out, err = sub.NextMsg(10 * time.Second)
			if err != nil {
				t.Fatalf("no outcome of the failing job: %v", err)
			}
			if out.Header.Get("Shaper-State") != "failed" || !strings.Contains(out.Header.Get("Shaper-Error"), "500") ||
				out.Header.Get("Shaper-Status-Code") != "500" || out.Header.Get("Shaper-Attempt") != "2" {
				t.Fatalf("failed outcome %q headers %v", out.Data, out.Header)
			}
			rec, _ = status(t, in.nc, r.JobID)
			if rec.State != "failed" || !strings.Contains(rec.Error, "2 attempts failed") || rec.Attempts != 2 {
				t.Fatalf("failed record %+v", rec)
			}
			if backend == "jetstream" && rec.DeadLetterSeq == 0 {
				t.Fatalf("failed record names no dead letter: %+v", rec)
			}
			if err := json.Unmarshal([]byte(in.get(t, "/v1/downstreams/pay/jobs/"+r.JobID, 200)), &api); err != nil ||
				api.State != "failed" || api.Error != rec.Error {
				t.Fatalf("admin record of the failed job %+v: %v", api, err)
			}
			for {
				m, err := events.NextMsg(10 * time.Second)
				if err != nil {
					t.Fatalf("no failed event: %v", err)
				}
				if m.Header.Get("Shaper-Job-Id") != r.JobID || m.Header.Get("Shaper-State") != "failed" {
					continue
				}
				var ev jobRecord
				if err := json.Unmarshal(m.Data, &ev); err != nil || ev.Error != rec.Error {
					t.Fatalf("failed event %s: %v", m.Data, err)
				}
				break
			}
		})
	}
}

// TestBadReplyToIsRefused: a Shaper-Reply-To that is not a publish subject
// is bad_request naming the header.
func TestBadReplyToIsRefused(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	in := startDaemon(t, srv, baseConfig(outcomesLane("memory", "1h", gateway(t, nil).URL)))
	for _, bad := range []string{"a.*", "a.>", "a..b", "a b", ".a", strings.Repeat("x", 257)} {
		r := in.request(t, "shaper.jobs.pay", []byte("x"), map[string]string{"Shaper-Reply-To": bad})
		if r.Status != "rejected" || r.Reason != "bad_request" || !strings.Contains(r.Error, "Shaper-Reply-To") {
			t.Errorf("Shaper-Reply-To %q: %s", bad, r.Body)
		}
	}
}

// TestRecordPastKeepIsUnknown: a finished job's record goes once keep has
// passed, on both backends.
func TestRecordPastKeepIsUnknown(t *testing.T) {
	for _, backend := range []string{"memory", "jetstream"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			srv := runNATS(t)
			in := startDaemon(t, srv, baseConfig(outcomesLane(backend, "1s", gateway(t, nil).URL)))
			r, sub := sendWaiting(t, in, "x")
			if _, err := sub.NextMsg(10 * time.Second); err != nil {
				t.Fatal(err)
			}
			if rec, _ := status(t, in.nc, r.JobID); rec.State != "succeeded" {
				t.Fatalf("record before keep: %+v", rec)
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				rec, _ := status(t, in.nc, r.JobID)
				if rec.State == "unknown" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("record still %+v 20s after a keep of 1s", rec)
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
}

// TestStoredEventsReachALateReader: on a jetstream downstream a consumer
// that subscribes after the job ended reads its events from the stream.
func TestStoredEventsReachALateReader(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	in := startDaemon(t, srv, baseConfig(outcomesLane("jetstream", "1h", gateway(t, nil).URL)))
	r, sub := sendWaiting(t, in, "x")
	if _, err := sub.NextMsg(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	js, err := natsjs.New(in.nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name, err := js.StreamNameBySubject(ctx, "shaper.events.pay.queued")
	if err != nil {
		t.Fatalf("no stream stores the events: %v", err)
	}
	c, err := js.OrderedConsumer(ctx, name, natsjs.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 3 {
		m, err := c.Next(natsjs.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("stored events so far %v: %v", got, err)
		}
		if m.Headers().Get("Shaper-Job-Id") == r.JobID {
			got = append(got, m.Headers().Get("Shaper-State"))
		}
	}
	if !slices.Equal(got, []string{"queued", "started", "succeeded"}) {
		t.Fatalf("stored events %v", got)
	}
}

// TestNATSRequestSinkReplyIsTheResult: a NATS request sink's reply is the
// job's result and its outcome.
func TestNATSRequestSinkReplyIsTheResult(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	in := startDaemon(t, srv, `
nats: { url: "%NATS%" }
admin: { listen: "127.0.0.1:0" }
downstreams:
  pay:
    rate: 50/s
    queue: { capacity: 10, backend: memory }
    sink: { nats: { subject: erp.orders, request: true, timeout: 2s } }
    outcomes: { keep: 1h }
`)
	erp, err := in.nc.Subscribe("erp.orders", func(m *nats.Msg) {
		reply := nats.NewMsg(m.Reply)
		reply.Header.Set("Content-Type", "text/plain")
		reply.Data = []byte("order " + string(m.Data) + " booked")
		_ = m.RespondMsg(reply)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer erp.Unsubscribe()
	r, sub := sendWaiting(t, in, "42")
	out, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if string(out.Data) != "order 42 booked" || out.Header.Get("Content-Type") != "text/plain" || out.Header.Get("Shaper-State") != "succeeded" {
		t.Fatalf("outcome %q %v", out.Data, out.Header)
	}
	if rec, _ := status(t, in.nc, r.JobID); rec.Result == nil || string(rec.Result.Body) != "order 42 booked" || rec.Result.StatusCode != 0 {
		t.Fatalf("record %+v", rec)
	}
}

// TestOutcomeSurvivesKillNine: a job accepted while its downstream is
// paused, the daemon killed -9 and started again, then resumed: the
// producer still gets its outcome, sent by the new process from the
// subject stored with the job.
func TestOutcomeSurvivesKillNine(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	gw := gateway(t, nil)
	conf := fmt.Sprintf(`
nats: { url: %q }
admin: { listen: "%%ADMIN%%" }
shutdown_grace: 2s
downstreams:`, srv.ClientURL()) + outcomesLane("jetstream", "1h", gw.URL)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	p := startShaperd(t, conf)
	p.post(t, "/v1/downstreams/pay/pause")
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg("shaper.jobs.pay")
	m.Data = []byte("charge")
	m.Header.Set("Shaper-Reply-To", inbox)
	resp, err := nc.RequestMsg(m, 10*time.Second)
	if err != nil || resp.Header.Get("Shaper-Status") != "accepted" {
		t.Fatalf("accept: %v %v", err, resp)
	}
	var r reply
	_ = json.Unmarshal(resp.Data, &r)
	if rec, _ := status(t, nc, r.JobID); rec.State != "queued" {
		t.Fatalf("record while paused: %+v", rec)
	}
	p.kill(t)
	p = startShaperd(t, conf)
	// The new process tells the queued job's state from its queue: the
	// intake stored the job and no record beside it.
	if rec, _ := status(t, nc, r.JobID); rec.State != "queued" || rec.AcceptedAt == "" {
		t.Fatalf("record of the queued job after the restart: %+v", rec)
	}
	if n := streamMsgs(t, nc, "OUTCOMES_pay"); n != 0 { // SHAPER_OUTCOMES_pay
		t.Fatalf("the outcomes stream holds %d records while the one job is queued, want 0", n)
	}
	p.post(t, "/v1/downstreams/pay/resume")
	out, err := sub.NextMsg(20 * time.Second)
	if err != nil {
		t.Fatalf("no outcome after kill -9 and restart: %v", err)
	}
	if out.Header.Get("Shaper-Job-Id") != r.JobID || out.Header.Get("Shaper-State") != "succeeded" ||
		string(out.Data) != fmt.Sprintf(`{"authorization":"AUTH-%s"}`, r.JobID) {
		t.Fatalf("outcome %q %v", out.Data, out.Header)
	}
}

// TestReplayedDeadLetterGoesBackToQueued: a job that failed for good is
// replayed from its dead letter; its record leaves failed for queued and
// ends succeeded, under the same job id, on both backends.
func TestReplayedDeadLetterGoesBackToQueued(t *testing.T) {
	for _, backend := range []string{"memory", "jetstream"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			srv := runNATS(t)
			var failing atomic.Bool
			failing.Store(true)
			in := startDaemon(t, srv, baseConfig(outcomesLane(backend, "1h", gateway(t, &failing).URL)))
			events, err := in.nc.SubscribeSync("shaper.events.pay.*")
			if err != nil {
				t.Fatal(err)
			}
			r, sub := sendWaiting(t, in, "charge")
			if out, err := sub.NextMsg(10 * time.Second); err != nil || out.Header.Get("Shaper-State") != "failed" {
				t.Fatalf("first outcome %v: %v", out, err)
			}
			failing.Store(false)
			if status, body := in.call(t, http.MethodPost, "/v1/downstreams/pay/dead/replay", `{"rate":"10/s"}`); status != http.StatusAccepted {
				t.Fatalf("replay: %d %s", status, body)
			}
			deadline := time.Now().Add(20 * time.Second)
			var got []string
			for !slices.Contains(got, "succeeded") {
				m, err := events.NextMsg(time.Until(deadline))
				if err != nil {
					t.Fatalf("events of %s so far %v: %v", r.JobID, got, err)
				}
				if m.Header.Get("Shaper-Job-Id") == r.JobID {
					got = append(got, m.Header.Get("Shaper-State"))
				}
			}
			i := slices.Index(got, "failed")
			if i < 0 || !slices.Equal(got[i+1:], []string{"queued", "started", "succeeded"}) {
				t.Fatalf("events %v: want failed, then queued, started, succeeded", got)
			}
			if rec, _ := status(t, in.nc, r.JobID); rec.State != "succeeded" {
				t.Fatalf("record after the replay: %+v", rec)
			}
		})
	}
}

// TestDuplicateAnswersTheFirstJobsState: a repeated Nats-Msg-Id is
// answered as a duplicate with the first job's id and its current state,
// on both backends.
func TestDuplicateAnswersTheFirstJobsState(t *testing.T) {
	for _, backend := range []string{"memory", "jetstream"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			srv := runNATS(t)
			in := startDaemon(t, srv, baseConfig(outcomesLane(backend, "1h", gateway(t, nil).URL)))
			hdr := map[string]string{"Nats-Msg-Id": "order-7"}
			first := in.request(t, "shaper.jobs.pay", []byte("x"), hdr)
			deadline := time.Now().Add(10 * time.Second)
			for {
				if rec, _ := status(t, in.nc, first.JobID); rec.State == "succeeded" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the first job did not succeed")
				}
				time.Sleep(20 * time.Millisecond)
			}
			again := in.request(t, "shaper.jobs.pay", []byte("x"), hdr)
			var body struct {
				State string `json:"state"`
			}
			_ = json.Unmarshal([]byte(again.Body), &body)
			if !again.Duplicate || again.JobID != first.JobID || body.State != "succeeded" {
				t.Fatalf("duplicate reply %s", again.Body)
			}
		})
	}
}
