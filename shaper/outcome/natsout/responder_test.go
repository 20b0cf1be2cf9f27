package natsout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/shaper/outcome"
)

// table is a Lookup over fixed records; shared is what it says of every
// downstream.
func table(shared bool, recs ...outcome.Record) Lookup {
	return func(_ context.Context, ds, id string) (outcome.Record, bool, bool, error) {
		for _, r := range recs {
			if r.Downstream == ds && r.JobID == id {
				return r, true, shared, nil
			}
		}
		return outcome.Record{}, false, shared, nil
	}
}

func startResponder(t *testing.T, nc *nats.Conn, lookup Lookup) *Responder {
	t.Helper()
	r, err := NewResponder(nc, ResponderSettings{Lookup: lookup})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	return r
}

// ask requests job id of pay's status, and returns the answer and how
// long it took.
func ask(t *testing.T, nc *nats.Conn, id string) (*nats.Msg, time.Duration) {
	t.Helper()
	start := time.Now()
	m, err := nc.Request("shaper.status.pay."+id, nil, 5*time.Second)
	if err != nil {
		t.Fatalf("status of %s: %v", id, err)
	}
	return m, time.Since(start)
}

func TestResponderKnown(t *testing.T) {
	nc, _ := runNATS(t)
	want := rec("a1", outcome.Retrying)
	startResponder(t, nc, table(false, want))
	m, _ := ask(t, nc, "a1")
	var got outcome.Record
	if err := json.Unmarshal(m.Data, &got); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("answer %s (%v), want %+v", m.Data, err, want)
	}
	if m.Header.Get(HeaderState) != "retrying" {
		t.Fatalf("Shaper-State %q", m.Header.Get(HeaderState))
	}
}

// An unknown id of a shared downstream is answered at once; of a
// downstream whose records are the instance's own, after unknownDelay.
func TestResponderUnknown(t *testing.T) {
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprint("shared=", shared), func(t *testing.T) {
			nc, _ := runNATS(t)
			startResponder(t, nc, table(shared))
			m, took := ask(t, nc, "nope")
			if string(m.Data) != `{"job_id":"nope","state":"unknown"}` || m.Header.Get(HeaderState) != "unknown" {
				t.Fatalf("answer %s, headers %v", m.Data, m.Header)
			}
			if shared && took >= unknownDelay {
				t.Errorf("a shared downstream's unknown took %s", took)
			}
			if !shared && took < unknownDelay {
				t.Errorf("an own downstream's unknown came after %s, before %s", took, unknownDelay)
			}
		})
	}
}

// Of two instances with their own records, the one that knows the job
// answers first.
func TestResponderKnowerFirst(t *testing.T) {
	nc, _ := runNATS(t)
	other, err := nats.Connect(nc.ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	startResponder(t, other, table(false))
	startResponder(t, nc, table(false, rec("a1", outcome.Queued)))
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishRequest("shaper.status.pay.a1", inbox, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"queued", "unknown"} {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Header.Get(HeaderState); got != want {
			t.Fatalf("answer %q (%s), want %q next", got, m.Data, want)
		}
	}
}

// A failed look-up is answered with the error; a request without a
// reply subject is not looked up.
func TestResponderErrorAndNoReply(t *testing.T) {
	nc, _ := runNATS(t)
	var calls atomic.Int32
	startResponder(t, nc, func(context.Context, string, string) (outcome.Record, bool, bool, error) {
		calls.Add(1)
		return outcome.Record{}, false, false, errors.New("store down")
	})
	if err := nc.Publish("shaper.status.pay.x", nil); err != nil {
		t.Fatal(err)
	}
	m, took := ask(t, nc, "a1")
	if took >= unknownDelay || m.Header.Get(HeaderState) != "" || !strings.Contains(m.Header.Get(HeaderError), "store down") {
		t.Fatalf("answer after %s with headers %v", took, m.Header)
	}
	var body struct{ JobID, State, Error string }
	if err := json.Unmarshal(m.Data, &body); err != nil || body.State != "unknown" ||
		!strings.Contains(body.Error, "look up job a1 of pay: store down") {
		t.Fatalf("answer %s (%v)", m.Data, err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d look-ups, want 1: the request without a reply subject is ignored", n)
	}
}

// Past maxLookups in flight a request is answered busy at once.
func TestResponderBusy(t *testing.T) {
	nc, _ := runNATS(t)
	in, release := make(chan struct{}, maxLookups), make(chan struct{})
	startResponder(t, nc, func(ctx context.Context, _, id string) (outcome.Record, bool, bool, error) {
		if id == "slow" {
			in <- struct{}{}
			<-release
		}
		return outcome.Record{}, false, true, nil
	})
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	for range maxLookups {
		if err := nc.PublishRequest("shaper.status.pay.slow", inbox, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range maxLookups {
		<-in
	}
	m, _ := ask(t, nc, "fast")
	if !strings.HasPrefix(m.Header.Get(HeaderError), "busy") {
		t.Fatalf("answer %s with headers %v, want busy", m.Data, m.Header)
	}
	close(release)
	for range maxLookups {
		if m, err := sub.NextMsg(5 * time.Second); err != nil || m.Header.Get(HeaderState) != "unknown" {
			t.Fatalf("answer to a slow look-up: %v, %v", m, err)
		}
	}
}

// Stop drops the delayed answers, cancels the look-ups in flight and
// waits for them; it is idempotent, and nothing starts after it.
func TestResponderStop(t *testing.T) {
	nc, _ := runNATS(t)
	inflight := make(chan struct{})
	r := startResponder(t, nc, func(ctx context.Context, _, id string) (outcome.Record, bool, bool, error) {
		if id == "stuck" {
			close(inflight)
			<-ctx.Done()
			return outcome.Record{}, false, false, ctx.Err()
		}
		return outcome.Record{}, false, false, nil
	})
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"later", "stuck"} {
		if err := nc.PublishRequest("shaper.status.pay."+id, inbox, nil); err != nil {
			t.Fatal(err)
		}
	}
	<-inflight
	deadline := time.Now().Add(5 * time.Second)
	for pending(r) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := r.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	// The stuck look-up's cancellation is answered; the delayed unknown
	// is not.
	for {
		m, err := sub.NextMsg(2 * unknownDelay)
		if errors.Is(err, nats.ErrTimeout) {
			break
		}
		if err != nil || m.Header.Get(HeaderState) == "unknown" {
			t.Fatalf("after Stop: %v, %v", m, err)
		}
	}
	if err := r.Start(context.Background()); !errors.Is(err, ErrStopped) {
		t.Fatalf("Start after Stop: %v", err)
	}
}

func pending(r *Responder) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.timers)
}
