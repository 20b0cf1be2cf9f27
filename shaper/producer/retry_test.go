package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/shaper/producer"
)

// A tight admission limit: acme's second job is rate limited with
// Retry-After 1; SubmitRetry waits it out and the job is accepted.
func TestSubmitRetryWaitsOutRetryAfter(t *testing.T) {
	d, nc := testShaperd(t, daemonConfig(lane("erp", "100/s", "capacity: 100",
		"    admission: { mode: token_bucket, rate: 1/s, burst: 1 }\n")))
	if _, err := producer.Submit(t.Context(), nc, "erp", []byte("1"), producer.Key("acme")); err != nil {
		t.Fatal(err)
	}
	var retries []producer.Retry
	start := time.Now()
	res, err := producer.SubmitRetry(t.Context(), nc, "erp", []byte("2"), producer.Key("acme"),
		producer.OnRetry(func(r producer.Retry) { retries = append(retries, r) }))
	took := time.Since(start)
	if err != nil || !res.Accepted || res.Duplicate {
		t.Fatalf("SubmitRetry: %+v, %v", res, err)
	}
	if len(retries) == 0 || !errors.Is(retries[0].Err, producer.ErrRateLimited) ||
		retries[0].Wait < time.Second || retries[0].Wait >= 1500*time.Millisecond {
		t.Fatalf("retries %+v; want a rate_limited first attempt, waited 1s..1.5s", retries)
	}
	if took < time.Second {
		t.Errorf("accepted after %s, before the Retry-After of 1s", took)
	}
	if got := d.down.wait(2); len(got) != 2 {
		t.Errorf("%d deliveries, want 2", len(got))
	}
}

func TestSubmitRetryStops(t *testing.T) {
	_, nc := testShaperd(t, daemonConfig(lane("erp", "100/s", "capacity: 100",
		"    admission: { mode: token_bucket, rate: 1/m, burst: 1 }\n")))
	if _, err := producer.Submit(t.Context(), nc, "erp", nil, producer.Key("acme")); err != nil {
		t.Fatal(err)
	}
	t.Run("cancel during the wait", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		start := time.Now()
		_, err := producer.SubmitRetry(ctx, nc, "erp", nil, producer.Key("acme"),
			producer.OnRetry(func(producer.Retry) { time.AfterFunc(200*time.Millisecond, cancel) }))
		if !errors.Is(err, context.Canceled) || !errors.Is(err, producer.ErrRateLimited) {
			t.Fatalf("err = %v, want context.Canceled and ErrRateLimited", err)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("returned %s after the start, long after the cancel", took)
		}
	})
	t.Run("deadline before Retry-After", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		retried := false
		res, err := producer.SubmitRetry(ctx, nc, "erp", nil, producer.Key("acme"),
			producer.OnRetry(func(producer.Retry) { retried = true }))
		if !errors.Is(err, producer.ErrRateLimited) || errors.Is(err, context.DeadlineExceeded) || retried || ctx.Err() != nil {
			t.Fatalf("%+v, %v; want the rejection at once, not a wait past the deadline", res, err)
		}
	})
	t.Run("final rejection", func(t *testing.T) {
		retried := false
		_, err := producer.SubmitRetry(t.Context(), nc, "nope", nil, producer.OnRetry(func(producer.Retry) { retried = true }))
		if !errors.Is(err, producer.ErrUnknownDownstream) || retried {
			t.Fatalf("err = %v (retried: %v), want unknown_downstream at once", err, retried)
		}
	})
	t.Run("bad MaxRetryWait", func(t *testing.T) {
		if _, err := producer.SubmitRetry(t.Context(), nc, "erp", nil, producer.MaxRetryWait(0)); err == nil {
			t.Fatal("MaxRetryWait(0) accepted")
		}
	})
}

// A responder that stays silent for the first request, then answers:
// SubmitRetry times out, backs off and retries with the same Nats-Msg-Id.
func TestSubmitRetryTransport(t *testing.T) {
	nc := runNATS(t)
	var mu sync.Mutex
	var ids []string
	sub, err := nc.Subscribe("flaky.printer", func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		ids = append(ids, m.Header.Get(producer.HeaderMsgID))
		if len(ids) == 1 {
			return
		}
		reply := nats.NewMsg(m.Reply)
		reply.Header.Set(producer.HeaderStatus, "accepted")
		reply.Data, _ = json.Marshal(map[string]any{"status": "accepted", "downstream": "printer", "job_id": "j1", "position": 1})
		_ = m.RespondMsg(reply)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	c, err := producer.New(nc, producer.SubjectPrefix("flaky"), producer.Timeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var retries []producer.Retry
	res, err := c.SubmitRetry(t.Context(), "printer", nil, producer.OnRetry(func(r producer.Retry) { retries = append(retries, r) }))
	if err != nil || res.JobID != "j1" {
		t.Fatalf("SubmitRetry: %+v, %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 2 || ids[0] == "" || ids[0] != ids[1] {
		t.Errorf("Nats-Msg-Id per attempt %q, want one id set by SubmitRetry on both", ids)
	}
	if len(retries) != 1 || !errors.Is(retries[0].Err, nats.ErrTimeout) {
		t.Errorf("retries %+v, want one after a timeout", retries)
	}

	// No responders: backoff doubles (equal jitter: d/2..d) until the next
	// wait would pass the deadline; the error is nats.ErrNoResponders.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	retries = nil
	_, err = c.SubmitRetry(ctx, "nobody", nil, producer.OnRetry(func(r producer.Retry) { retries = append(retries, r) }))
	if !errors.Is(err, nats.ErrNoResponders) || len(retries) < 3 {
		t.Fatalf("err = %v after %d retries, want nats.ErrNoResponders after several", err, len(retries))
	}
	for i, r := range retries {
		if d := 100 * time.Millisecond << i; r.Wait < d/2 || r.Wait >= d {
			t.Errorf("wait %d = %s, want %s..%s", i, r.Wait, d/2, d)
		}
	}
}

// A responder that never answers and a deadline that ends during the
// retried request: the error names both the deadline and the answer that
// was being retried (it named only the deadline, losing why it retried).
func TestSubmitRetryDeadlineDuringRetriedRequest(t *testing.T) {
	nc := runNATS(t)
	sub, err := nc.Subscribe("silent.printer", func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	c, err := producer.New(nc, producer.SubjectPrefix("silent"), producer.Timeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// The first request times out at 300 ms, the backoff waits 50..100 ms,
	// and the deadline at 500 ms falls inside the second request.
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	_, err = c.SubmitRetry(ctx, "printer", nil)
	if !errors.Is(err, nats.ErrTimeout) {
		t.Errorf("err = %v, want one that matches nats.ErrTimeout", err)
	}
}
