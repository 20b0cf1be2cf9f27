package producer_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/shaper/producer"
)

// The lanes of TestSubmit: ok drains fast; full holds one job for an hour;
// limited admits one job per key per minute; slow starts one job a minute
// and rejects one that would expire. Keys travel in X-Tenant.
var submitConfig = strings.Replace(daemonConfig(
	lane("ok", "100/s", "capacity: 100", ""),
	lane("full", "1/h", "capacity: 1", ""),
	lane("limited", "100/s", "capacity: 100", "    admission: { mode: token_bucket, rate: 1/m, burst: 1 }\n"),
	lane("slow", "1/m", "capacity: 100, reject_would_expire: true", ""),
), "shutdown_grace: 2s", "shutdown_grace: 2s\ningress: { key_header: X-Tenant, max_payload: 1KiB }", 1)

func TestSubmit(t *testing.T) {
	d, nc := testShaperd(t, submitConfig)
	c, err := producer.New(nc, producer.KeyHeader("x-tenant"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	res, err := c.Submit(ctx, "ok", []byte(`{"doc":1}`), producer.Key("acme"),
		producer.ContentType("application/json"), producer.Header("X-Trace", "t-1"), producer.MaxWait(time.Minute))
	if err != nil || !res.Accepted || res.JobID == "" || res.Downstream != "ok" || res.Position != 1 || res.ETA < 0 || res.Duplicate {
		t.Fatalf("accepted: %+v, %v", res, err)
	}
	got := d.down.wait(1)
	if len(got) != 1 || got[0].body != `{"doc":1}` || got[0].header.Get("Content-Type") != "application/json" ||
		got[0].header.Get("Shaper-Job-Id") != res.JobID {
		t.Fatalf("downstream got %+v, want the payload, Content-Type and job id %s", got, res.JobID)
	}

	// Each rejection is a *RejectedError matching its reason's sentinel.
	// full holds one job, and its second start is an hour away: by the
	// third job (the second, if the first has not started yet) it is full.
	// A second job for acme on limited is over the key's limit, while
	// globex still has its token.
	for i := 0; ; i++ {
		_, err := c.Submit(ctx, "full", nil)
		if errors.Is(err, producer.ErrQueueFull) {
			break
		}
		if err != nil || i == 2 {
			t.Fatalf("filling full, job %d: %v", i, err)
		}
	}
	if _, err := c.Submit(ctx, "limited", nil, producer.Key("acme")); err != nil {
		t.Fatalf("first job on limited: %v", err)
	}
	if res, err := c.Submit(ctx, "limited", nil, producer.Key("globex")); err != nil || !res.Accepted {
		t.Fatalf("another key on limited: %+v, %v (is the key header sent?)", res, err)
	}
	if _, err := c.Submit(ctx, "slow", nil); err != nil {
		t.Fatalf("first job on slow: %v", err)
	}
	tests := []struct {
		name       string
		downstream string
		payload    []byte
		opts       []producer.Option
		want       error
		reason     string
		retryAfter bool
	}{
		{"queue full", "full", nil, nil, producer.ErrQueueFull, "queue_full", true},
		{"rate limited", "limited", nil, []producer.Option{producer.Key("acme")}, producer.ErrRateLimited, "rate_limited", true},
		{"would expire", "slow", nil, []producer.Option{producer.MaxWait(time.Second)}, producer.ErrWouldExpire, "would_expire", true},
		{"unknown downstream", "nope", nil, nil, producer.ErrUnknownDownstream, "unknown_downstream", false},
		{"payload too large", "ok", make([]byte, 2048), nil, producer.ErrPayloadTooLarge, "payload_too_large", false},
		{"bad max wait", "ok", nil, []producer.Option{producer.MaxWait(-time.Second)}, producer.ErrBadRequest, "bad_request", false},
		{"cost above max_cost", "ok", nil, []producer.Option{producer.Cost(2)}, producer.ErrBadRequest, "bad_request", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := c.Submit(ctx, tt.downstream, tt.payload, tt.opts...)
			checkRejected(t, res, err, tt.want, tt.reason, tt.retryAfter)
		})
	}
}

// checkRejected checks a rejection's error and Result.
func checkRejected(t *testing.T, res producer.Result, err, want error, reason string, retryAfter bool) {
	t.Helper()
	var rej *producer.RejectedError
	switch {
	case !errors.Is(err, want) || !errors.Is(err, producer.ErrRejected):
		t.Fatalf("err = %v, want %v and ErrRejected", err, want)
	case !errors.As(err, &rej) || rej.Result != res:
		t.Fatalf("err %v carries %+v, want the Result %+v", err, rej, res)
	case res.Accepted || res.Reason != reason || res.ErrorText == "":
		t.Fatalf("result %+v, want rejected %s with the daemon's text", res, reason)
	case retryAfter != (res.RetryAfter > 0) || res.RetryAfter%time.Second != 0:
		t.Fatalf("Retry-After %s; want whole seconds, present: %v", res.RetryAfter, retryAfter)
	}
	for _, other := range []error{producer.ErrQueueFull, producer.ErrRateLimited, producer.ErrWouldExpire,
		producer.ErrUnknownDownstream, producer.ErrPayloadTooLarge, producer.ErrBadRequest, producer.ErrUnavailable} {
		if other != want && errors.Is(err, other) {
			t.Errorf("%v also matches %v", err, other)
		}
	}
	t.Logf("%v", err)
}

func TestSubmitDuplicate(t *testing.T) {
	_, nc := testShaperd(t, daemonConfig(lane("ok", "100/s", "capacity: 100", "")))
	first, err := producer.Submit(t.Context(), nc, "ok", []byte("a"), producer.MsgID("order-1"))
	if err != nil || first.Duplicate {
		t.Fatalf("first: %+v, %v", first, err)
	}
	again, err := producer.Submit(t.Context(), nc, "ok", []byte("a"), producer.MsgID("order-1"))
	if err != nil || !again.Accepted || !again.Duplicate || again.JobID != first.JobID || again.Position != 0 {
		t.Fatalf("repeat: %+v, %v; want an accepted duplicate of %s", again, err, first.JobID)
	}
}

// With the shared admission store down, a fail-closed downstream rejects
// unavailable with Retry-After 1; SubmitRetry retries it.
// TestSubmitPriorityAndDelay: the options reach shaperd as it reads them:
// a delayed job's Result carries its instant, a priority past the levels
// is refused naming the valid range.
func TestSubmitPriorityAndDelay(t *testing.T) {
	_, nc := testShaperd(t, daemonConfig(lane("ok", "100/s", "capacity: 100, priorities: 2", "")))
	at := time.Now().Add(time.Hour).Truncate(time.Second).Add(250 * time.Millisecond)
	res, err := producer.Submit(t.Context(), nc, "ok", []byte("a"), producer.Priority(0), producer.NotBefore(at))
	if err != nil || !res.NotBefore.Equal(at) || res.ETA < 59*time.Minute {
		t.Fatalf("not before %s: %+v, %v; want that instant and an ETA at or after it", at, res, err)
	}
	res, err = producer.Submit(t.Context(), nc, "ok", []byte("b"), producer.Delay(time.Minute))
	if err != nil || res.NotBefore.IsZero() || res.Position != 1 {
		t.Fatalf("delay 1m: %+v, %v; want a NotBefore, and position 1 (the other starts later)", res, err)
	}
	res, err = producer.Submit(t.Context(), nc, "ok", []byte("c"), producer.Priority(2))
	if err == nil || res.Reason != producer.ReasonBadRequest || !strings.Contains(res.ErrorText, "0..1 are valid") {
		t.Fatalf("priority 2 of 2 levels: %+v, %v; want bad_request naming 0..1", res, err)
	}
}

func TestSubmitUnavailable(t *testing.T) {
	cfg := strings.Replace(daemonConfig(lane("closed", "100/s", "capacity: 100",
		"    admission: { mode: token_bucket, rate: 10/s, burst: 50, store: nats, fail_closed: true }\n")),
		`nats: { url: "%NATS%" }`, `nats: { url: "%NATS%", jetstream: { admission_timeout: 200ms } }`, 1)
	d, nc := testShaperd(t, cfg)
	if _, err := producer.Submit(t.Context(), nc, "closed", nil, producer.Key("k")); err != nil {
		t.Fatalf("before the outage: %v", err)
	}
	if err := d.srv.ShutdownJetStream(); err != nil {
		t.Fatal(err)
	}
	res, err := producer.Submit(t.Context(), nc, "closed", nil, producer.Key("k"))
	checkRejected(t, res, err, producer.ErrUnavailable, "unavailable", true)

	var retries []producer.Retry
	res, err = producer.SubmitRetry(t.Context(), nc, "closed", nil, producer.Key("k"), producer.MaxAttempts(2),
		producer.OnRetry(func(r producer.Retry) { retries = append(retries, r) }))
	if !errors.Is(err, producer.ErrUnavailable) || len(retries) != 1 || retries[0].Wait < time.Second {
		t.Fatalf("SubmitRetry: %+v, %v after retries %+v; want unavailable after one wait of at least 1s", res, err, retries)
	}
}

func TestSubmitTransport(t *testing.T) {
	d, nc := testShaperd(t, daemonConfig(lane("ok", "100/s", "capacity: 100", "")))
	_, err := producer.Submit(t.Context(), nc, "bad.name", nil)
	if err == nil || !strings.Contains(err.Error(), "letters, digits") {
		t.Errorf("bad downstream name: %v", err)
	}
	c, err := producer.New(nc, producer.SubjectPrefix("elsewhere"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(t.Context(), "ok", nil); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("no daemon on the prefix: %v, want nats.ErrNoResponders", err)
	}
	if err := c.Publish("ok", []byte("elsewhere")); err != nil {
		t.Errorf("Publish to a prefix nobody reads: %v", err)
	}
	def, err := producer.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := def.Publish("ok", []byte("plain")); err != nil {
		t.Errorf("Publish: %v", err)
	}
	if got := d.down.wait(1); len(got) != 1 || got[0].body != "plain" {
		t.Errorf("the plain publish delivered %+v", got)
	}
}
