package natsout

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/shaper/outcome"
)

// The headers of events and outcomes.
const (
	HeaderJobID      = "Shaper-Job-Id"
	HeaderState      = "Shaper-State"
	HeaderAttempt    = "Shaper-Attempt"
	HeaderStatusCode = "Shaper-Status-Code"
	HeaderError      = "Shaper-Error"
	HeaderReplyTo    = "Shaper-Reply-To"
)

// MaxErrorHeader bounds an outcome's Shaper-Error header, in bytes.
const MaxErrorHeader = 1024

// MaxReplyTo bounds a reply-to subject, in bytes.
const MaxReplyTo = 256

// Teller tells a job's changes on a NATS connection (outcome.Teller):
// core publishes, which a downstream's event stream captures where there
// is one. It never waits for anyone. Safe for concurrent use.
type Teller struct {
	nc     *nats.Conn
	prefix string

	// An event's payload buffer and headers are reused from one event to
	// the next (the connection copies them): publishing one allocates
	// little more than its subject.
	mu  sync.Mutex
	buf []byte
	hdr nats.Header
}

// DefaultEventsPrefix is the events prefix of a Teller given none.
const DefaultEventsPrefix = "shaper.events"

// NewTeller returns a Teller publishing events under eventsPrefix (""
// = DefaultEventsPrefix).
func NewTeller(nc *nats.Conn, eventsPrefix string) *Teller {
	if eventsPrefix == "" {
		eventsPrefix = DefaultEventsPrefix
	}
	return &Teller{nc: nc, prefix: eventsPrefix, hdr: nats.Header{
		HeaderJobID: make([]string, 1), HeaderState: make([]string, 1), HeaderAttempt: make([]string, 1)}}
}

// Event publishes rec as JSON on <eventsPrefix>.<downstream>.<state>,
// with headers Shaper-Job-Id, Shaper-State and Shaper-Attempt.
func (t *Teller) Event(rec *outcome.Record) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	data, err := appendRecord(t.buf[:0], rec)
	if err != nil {
		return fmt.Errorf("event of job %s of %s: %w", rec.JobID, rec.Downstream, err)
	}
	if cap(data) <= maxKeptBuf {
		t.buf = data
	}
	t.hdr[HeaderJobID][0] = rec.JobID
	t.hdr[HeaderState][0] = string(rec.State)
	t.hdr[HeaderAttempt][0] = strconv.Itoa(rec.Attempts)
	m := nats.Msg{Subject: t.prefix + "." + rec.Downstream + "." + string(rec.State), Data: data, Header: t.hdr}
	if err := t.nc.PublishMsg(&m); err != nil {
		return fmt.Errorf("publish event %s of job %s on %s: %w", rec.State, rec.JobID, m.Subject, err)
	}
	return nil
}

// maxKeptBuf bounds the payload buffer a Teller keeps for the next
// event: a record with a large result is encoded in a buffer of its own.
const maxKeptBuf = 64 << 10

// Outcome publishes rec's outcome on subject: the payload is the
// downstream's answer body as kept (empty without one); headers
// Shaper-Job-Id, Shaper-State, Shaper-Attempt, Shaper-Status-Code (an
// HTTP answer's), Shaper-Error (a job that did not succeed; one line, at
// most MaxErrorHeader bytes) and the answer's Content-Type.
func (t *Teller) Outcome(subject string, rec *outcome.Record) error {
	m := &nats.Msg{Subject: subject, Header: headers(rec)}
	if r := rec.Result; r != nil {
		m.Data = r.Body
		if r.StatusCode != 0 {
			m.Header.Set(HeaderStatusCode, strconv.Itoa(r.StatusCode))
		}
		if ct := r.ContentType(); ct != "" {
			m.Header.Set("Content-Type", ct)
		}
	}
	if rec.State != outcome.Succeeded && rec.Error != "" {
		m.Header.Set(HeaderError, oneLine(rec.Error, MaxErrorHeader))
	}
	if err := t.nc.PublishMsg(m); err != nil {
		return fmt.Errorf("publish outcome %s of job %s of %s on %s: %w", rec.State, rec.JobID, rec.Downstream, subject, err)
	}
	return nil
}

// headers are the headers every event and outcome carries.
func headers(rec *outcome.Record) nats.Header {
	h := nats.Header{}
	h.Set(HeaderJobID, rec.JobID)
	h.Set(HeaderState, string(rec.State))
	h.Set(HeaderAttempt, strconv.Itoa(rec.Attempts))
	return h
}

// oneLine is s with every control character (line breaks included) a
// space, cut to at most n bytes on a character boundary.
func oneLine(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// shorten is s, or its first 64 bytes and "…" when it is longer: what an
// error quotes of a value it refuses.
func shorten(s string) string {
	if len(s) <= 64 {
		return s
	}
	return oneLine(s, 64) + "…"
}

// ValidReplyTo checks subject as a job's Shaper-Reply-To: a publish
// subject of non-empty dot-separated tokens, none of them a wildcard (*
// or >), without spaces or control characters, at most MaxReplyTo bytes.
// The error, for a bad_request, names the header and what is valid.
func ValidReplyTo(subject string) error {
	bad := func(why string) error {
		return fmt.Errorf("%s %q: %s; want a publish subject: tokens separated by single dots, "+
			"no wildcard token (* or >), no spaces, tabs or line breaks, at most %d bytes",
			HeaderReplyTo, shorten(subject), why, MaxReplyTo)
	}
	switch {
	case subject == "":
		return bad("empty")
	case len(subject) > MaxReplyTo:
		return bad(fmt.Sprintf("%d bytes long", len(subject)))
	case strings.IndexFunc(subject, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0:
		return bad("holds a space or a control character")
	}
	for tok := range strings.SplitSeq(subject, ".") {
		switch tok {
		case "":
			return bad("has an empty token (a leading, trailing or double dot)")
		case "*", ">":
			return bad("has the wildcard token " + tok)
		}
	}
	return nil
}
