package jetstream

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

func TestParsePubAck(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, data string
		want       pubAck
		err        error // nil, natsjs.ErrInvalidJSAck, or an *natsjs.APIError (matched by code)
	}{
		{name: "stored", data: `{"stream":"SHAPER_printer","seq":42}`, want: pubAck{seq: 42}},
		{name: "largest sequence", data: `{"stream":"S","seq":18446744073709551615}`, want: pubAck{seq: 1<<64 - 1}},
		{name: "duplicate, as the server writes it", data: `{"stream":"S","seq":7,"duplicate": true}`, want: pubAck{seq: 7, duplicate: true}},
		{name: "domain", data: `{"stream":"S","domain":"hub","seq":9}`, want: pubAck{seq: 9}},
		{name: "spaces", data: `{"stream": "S", "seq": 3}`, want: pubAck{seq: 3}},
		{name: "refused", data: `{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"},"stream":"S","seq":0}`,
			err: &natsjs.APIError{ErrorCode: 10077}},
		{name: "no stream", data: `{"seq":1}`, err: natsjs.ErrInvalidJSAck},
		{name: "not JSON", data: `+OK`, err: natsjs.ErrInvalidJSAck},
		{name: "empty", data: ``, err: natsjs.ErrInvalidJSAck},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parsePubAck([]byte(c.data))
			var want, have *natsjs.APIError
			switch {
			case errors.As(c.err, &want):
				if !errors.As(err, &have) || have.ErrorCode != want.ErrorCode {
					t.Fatalf("err = %v, want API error %d", err, want.ErrorCode)
				}
			case !errors.Is(err, c.err):
				t.Fatalf("err = %v, want %v", err, c.err)
			case got != c.want:
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// The hand-read PubAck agrees with encoding/json whenever it reads one.
func FuzzParseStored(f *testing.F) {
	for _, s := range []string{`{"stream":"S","seq":42}`, `{"stream":"S","seq":042}`, `{"stream":"a\"b","seq":1}`,
		`{"stream":"S","seq":-1}`, `{"stream":"S","seq":18446744073709551616}`, `{"stream":"","seq":1}`,
		`{"stream":"S","seq":1 }`, `{"stream":"S","seq":1}}`, `{"stream":"S\\","seq":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := parseStored(b)
		if !ok {
			return
		}
		var r struct {
			Stream string `json:"stream"`
			Seq    uint64 `json:"seq"`
		}
		if err := json.Unmarshal(b, &r); err != nil || r.Stream == "" || r.Seq != got.seq || got.duplicate {
			t.Fatalf("parseStored(%q) = %+v; encoding/json: %+v, %v", b, got, r, err)
		}
	})
}

// answers records what a publisher answered, by job id.
type answers chan error

func (a answers) answer(_ pendingPub, _ pubAck, err error) { a <- err }

// blackhole starts a server and a subscriber on "blackhole" that never
// answers, and returns a connection: a store published there gets no
// PubAck and no "no responders".
func blackhole(t *testing.T) (*nats.Conn, func()) {
	t.Helper()
	opts := natsserver.DefaultTestOptions
	opts.Port = -1
	srv := natsserver.RunServer(&opts)
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if _, err := nc.Subscribe("blackhole", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return nc, srv.Shutdown
}

// A store without a PubAck is answered errAckTimeout once, after the
// timeout, and its slot in the window is free again.
func TestPublisherAckTimeout(t *testing.T) {
	t.Parallel()
	nc, _ := blackhole(t)
	got := make(answers, 10)
	pb := newPublisher(nc, 10, got.answer)
	pb.timeout = 300 * time.Millisecond
	start := time.Now()
	for range 3 {
		if err := pb.publish(nats.NewMsg("blackhole"), pendingPub{}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		select {
		case err := <-got:
			if !errors.Is(err, errAckTimeout) {
				t.Fatalf("answer %v, want errAckTimeout", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a store without a PubAck was not answered within 10s")
		}
	}
	if d := time.Since(start); d < pb.timeout {
		t.Fatalf("answered after %s, before the timeout %s", d, pb.timeout)
	}
	select {
	case err := <-got:
		t.Fatalf("a store answered twice: %v", err)
	case <-time.After(2 * pb.timeout):
	}
	if n := len(pb.window); n != 0 {
		t.Fatalf("%d slots of the window still taken", n)
	}
}

// With MaxPending stores awaiting their PubAck, another is refused
// errStalled after stallWait rather than wait.
func TestPublisherStalls(t *testing.T) {
	t.Parallel()
	nc, _ := blackhole(t)
	got := make(answers, 10)
	pb := newPublisher(nc, 1, got.answer)
	if err := pb.publish(nats.NewMsg("blackhole"), pendingPub{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := pb.publish(nats.NewMsg("blackhole"), pendingPub{}); !errors.Is(err, errStalled) {
		t.Fatalf("publish into a full window: %v, want errStalled", err)
	}
	if d := time.Since(start); d < stallWait {
		t.Fatalf("refused after %s, before stallWait", d)
	}
}

// When the connection drops, the stores awaiting their PubAck are answered
// nats.ErrDisconnected at once (their PubAcks went to the old connection).
func TestPublisherDisconnect(t *testing.T) {
	t.Parallel()
	nc, stop := blackhole(t)
	got := make(answers, 10)
	pb := newPublisher(nc, 10, got.answer)
	for range 2 {
		if err := pb.publish(nats.NewMsg("blackhole"), pendingPub{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	stop()
	for range 2 {
		select {
		case err := <-got:
			if !errors.Is(err, nats.ErrDisconnected) {
				t.Fatalf("answer %v, want nats.ErrDisconnected", err)
			}
		case <-time.After(5 * time.Second): // well before ackTimeout
			t.Fatal("stores not answered when the connection dropped")
		}
	}
}
