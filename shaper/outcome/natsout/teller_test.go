package natsout

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/shaper/outcome"
)

// Events on a jetstream downstream are stored, so a consumer that comes
// later reads them.
func TestEventsStored(t *testing.T) {
	s, js := newStore(t)
	if err := s.EnsureEvents(context.Background(), "pay", "shaper.events", 1<<20, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureEvents(context.Background(), "pay", "shaper.events", 1<<20, time.Hour); err != nil {
		t.Fatalf("EnsureEvents again: %v", err)
	}
	cfg := streamConfig(t, js, "SHAPER_EVENTS_pay")
	if cfg.Subjects[0] != "shaper.events.pay.*" || cfg.MaxAge != time.Hour || cfg.MaxBytes != 1<<20 ||
		cfg.Discard != natsjs.DiscardOld || cfg.Storage != natsjs.FileStorage {
		t.Fatalf("events stream config %+v", cfg)
	}
	tell := NewTeller(s.js.Conn(), "")
	recs := []outcome.Record{rec("a1", outcome.Queued), rec("a1", outcome.Started), rec("a1", outcome.Succeeded)}
	for i := range recs {
		if err := tell.Event(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := js.OrderedConsumer(ctx, "SHAPER_EVENTS_pay", natsjs.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range recs {
		m, err := c.Next(natsjs.FetchContext(ctx))
		if err != nil {
			t.Fatalf("reading the events: %v", err)
		}
		var got outcome.Record
		if err := json.Unmarshal(m.Data(), &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("event %s: %+v (%v), want %+v", m.Subject(), got, err, want)
		}
		h := m.Headers()
		if m.Subject() != "shaper.events.pay."+string(want.State) || h.Get(HeaderJobID) != "a1" ||
			h.Get(HeaderState) != string(want.State) || h.Get(HeaderAttempt) != "1" {
			t.Fatalf("event on %s with headers %v", m.Subject(), h)
		}
	}
}

// An outcome carries the answer's body and the Shaper-* headers; an
// error header is one bounded line, and only when the job did not
// succeed.
func TestOutcome(t *testing.T) {
	nc, _ := runNATS(t)
	sub, err := nc.SubscribeSync("reply.here")
	if err != nil {
		t.Fatal(err)
	}
	tell := NewTeller(nc, "shaper.events")
	ok := rec("a1", outcome.Succeeded)
	ok.Attempts = 2
	ok.Error = "an earlier try failed"
	ok.Result = &outcome.Result{StatusCode: 200, Headers: map[string]string{"Content-Type": "text/plain"},
		Body: []byte("done"), Bytes: 4}
	failed := rec("b2", outcome.Failed)
	failed.Error = "line one\r\nline two " + strings.Repeat("é", 2000)
	failed.Result = &outcome.Result{Headers: map[string]string{"X": "y"}} // a NATS reply, no body
	dropped := rec("c3", outcome.Dropped)
	for _, c := range []struct {
		rec    *outcome.Record
		body   string
		header map[string]string
	}{
		{&ok, "done", map[string]string{HeaderJobID: "a1", HeaderState: "succeeded", HeaderAttempt: "2",
			HeaderStatusCode: "200", "Content-Type": "text/plain", HeaderError: ""}},
		{&failed, "", map[string]string{HeaderJobID: "b2", HeaderState: "failed", HeaderAttempt: "1",
			HeaderStatusCode: "", "Content-Type": ""}},
		{&dropped, "", map[string]string{HeaderJobID: "c3", HeaderState: "dropped", HeaderError: ""}},
	} {
		if err := tell.Outcome("reply.here", c.rec); err != nil {
			t.Fatal(err)
		}
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Data) != c.body {
			t.Errorf("outcome of %s: body %q, want %q", c.rec.JobID, m.Data, c.body)
		}
		for k, v := range c.header {
			if got := m.Header.Get(k); got != v {
				t.Errorf("outcome of %s: %s %q, want %q", c.rec.JobID, k, got, v)
			}
		}
		if c.rec == &failed {
			checkErrorHeader(t, m)
		}
	}
}

func checkErrorHeader(t *testing.T, m *nats.Msg) {
	t.Helper()
	e := m.Header.Get(HeaderError)
	if !strings.HasPrefix(e, "line one  line two é") || len(e) > MaxErrorHeader || len(e) < MaxErrorHeader-1 ||
		strings.ContainsAny(e, "\r\n") || !strings.HasSuffix(e, "é") {
		t.Errorf("Shaper-Error %q (%d bytes): want one line of at most %d bytes cut between characters",
			e, len(e), MaxErrorHeader)
	}
}

func TestValidReplyTo(t *testing.T) {
	for _, c := range []struct {
		name, subject, why string // why: "" = valid
	}{
		{"inbox", "_INBOX.abc.def", ""},
		{"one token", "replies", ""},
		{"star inside a token", "a.b*c", ""},
		{"max length", strings.Repeat("a", MaxReplyTo), ""},
		{"empty", "", "empty"},
		{"too long", strings.Repeat("a", MaxReplyTo+1), "257 bytes"},
		{"star token", "a.*.c", "wildcard token *"},
		{"gt token", "a.>", "wildcard token >"},
		{"space", "a b", "space"},
		{"tab", "a\tb", "space"},
		{"newline", "a\r\nb", "space"},
		{"leading dot", ".a", "empty token"},
		{"trailing dot", "a.", "empty token"},
		{"double dot", "a..b", "empty token"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := ValidReplyTo(c.subject)
			switch {
			case c.why == "" && err != nil:
				t.Fatalf("ValidReplyTo(%q): %v", c.subject, err)
			case c.why == "":
			case err == nil:
				t.Fatalf("ValidReplyTo(%q) took it", c.subject)
			case !strings.Contains(err.Error(), c.why) || !strings.Contains(err.Error(), "Shaper-Reply-To") ||
				!strings.Contains(err.Error(), "want a publish subject"):
				t.Fatalf("ValidReplyTo(%q): %v; want it to name the header, %q and what is valid", c.subject, err, c.why)
			}
		})
	}
}
