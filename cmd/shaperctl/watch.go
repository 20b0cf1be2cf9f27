package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/shaper/outcome"
	"github.com/shaperd/shaper/shaper/producer"
)

// defaultEventsPrefix is shaperd's ingress.events_prefix by default.
const defaultEventsPrefix = "shaper.events"

// watchOptions are the parsed flags of watch.
type watchOptions struct {
	Downstream   string
	NATSURL      string
	EventsPrefix string
	Since        time.Duration // 0: live events only
	Count        int           // stop after this many events; 0 = until interrupted
	Timeout      time.Duration
	JSON         bool
}

func (o watchOptions) subject() string { return o.EventsPrefix + "." + o.Downstream + ".*" }

const watchAbout = `Prints a downstream's job events as they happen, one line per change of
state: time, job id, state, attempt and error. shaperd publishes them on
<events-prefix>.<downstream>.<state> when the downstream has outcomes.events
on. With -since, a jetstream downstream's stored events from that long ago
are printed first (the daemon keeps them for outcomes.keep), then live ones;
a memory downstream's events are not stored, so -since does not apply.
The time is when the event was stored, or when it arrived here.
Runs until interrupted (Ctrl-C), or until -count events.
Exit code: 0 when stopped, 1 when NATS or the stored events cannot be
reached, 2 for a usage error.

Examples:
  shaperctl watch -downstream printer
  shaperctl watch -downstream pay -since 1h -json | jq .
`

func cmdWatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("watch", "-downstream NAME [-since 1h] [flags]", watchAbout, stderr)
	var o watchOptions
	fs.StringVar(&o.Downstream, "downstream", "", "the downstream `name` (required)")
	fs.StringVar(&o.NATSURL, "nats", "nats://127.0.0.1:4222", "NATS server `URL`")
	fs.StringVar(&o.EventsPrefix, "events-prefix", defaultEventsPrefix, "event subject prefix (ingress.events_prefix)")
	fs.DurationVar(&o.Since, "since", 0, "first print the stored events of this long ago (a jetstream downstream), e.g. 30m")
	fs.IntVar(&o.Count, "count", 0, "stop after `N` events (0 = until interrupted)")
	fs.DurationVar(&o.Timeout, "timeout", 5*time.Second, "how long to wait for NATS and the JetStream API")
	fs.BoolVar(&o.JSON, "json", false, "print each event's record as one line of JSON")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if msg := checkWatch(o); msg != "" {
		return usageErr(stderr, "watch", "%s", msg)
	}
	nc, err := nats.Connect(o.NATSURL, nats.Name("shaperctl watch"), nats.Timeout(o.Timeout))
	if err != nil {
		fmt.Fprintf(stderr, "shaperctl watch: cannot connect to NATS at %s: %v\nis shaperd running? is -nats right?\n", o.NATSURL, err)
		return exitFailed
	}
	defer nc.Close()
	if err := watch(ctx, nc, o, stdout); err != nil {
		fmt.Fprintf(stderr, "shaperctl watch: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// checkWatch returns what is wrong with o, or "".
func checkWatch(o watchOptions) string {
	switch {
	case o.Downstream == "":
		return "-downstream is required, e.g. -downstream printer"
	case !subjectToken.MatchString(o.Downstream):
		return fmt.Sprintf("-downstream %q: a downstream name has only letters, digits, - and _", o.Downstream)
	case o.Since < 0:
		return fmt.Sprintf("-since must be positive (or 0 for live events only), got %s", o.Since)
	case o.Count < 0:
		return fmt.Sprintf("-count must be 0 (until interrupted) or more, got %d", o.Count)
	case o.Timeout <= 0:
		return fmt.Sprintf("-timeout must be positive, got %s", o.Timeout)
	case o.EventsPrefix == "" || strings.ContainsAny(o.EventsPrefix, " *>"):
		return fmt.Sprintf("-events-prefix %q is not a subject prefix; e.g. %s", o.EventsPrefix, defaultEventsPrefix)
	}
	return ""
}

// jobEvent is one change of state as it came: when, its headers and record.
type jobEvent struct {
	at   time.Time
	hdr  nats.Header
	data []byte
}

// watch prints o's events until ctx ends or o.Count have been printed.
func watch(ctx context.Context, nc *nats.Conn, o watchOptions, w io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan jobEvent, 64)
	deliver := func(e jobEvent) {
		select {
		case events <- e:
		case <-ctx.Done():
		}
	}
	var stop func()
	var err error
	if o.Since > 0 {
		stop, err = consumeStored(ctx, nc, o, deliver)
	} else {
		stop, err = subscribeLive(nc, o, deliver)
	}
	if err != nil {
		return err
	}
	defer stop()
	defer cancel() // before stop: a delivery blocked on events gives up
	for n := 0; o.Count == 0 || n < o.Count; n++ {
		select {
		case e := <-events:
			if err := writeEvent(w, e, o.JSON); err != nil {
				return err
			}
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// subscribeLive delivers the events published from now on.
func subscribeLive(nc *nats.Conn, o watchOptions, deliver func(jobEvent)) (func(), error) {
	sub, err := nc.Subscribe(o.subject(), func(m *nats.Msg) { deliver(jobEvent{time.Now(), m.Header, m.Data}) })
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", o.subject(), err)
	}
	if err := nc.FlushTimeout(o.Timeout); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("subscribe to %s: %w; is -nats right?", o.subject(), err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// consumeStored delivers the events stored since o.Since ago, then the
// live ones, from an ordered consumer on the stream that holds them.
func consumeStored(ctx context.Context, nc *nats.Conn, o watchOptions, deliver func(jobEvent)) (func(), error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	stream, err := js.StreamNameBySubject(actx, o.subject())
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, fmt.Errorf("-since reads stored events, and no stream holds %s: is %s a memory downstream "+
			"(its events are not stored), or are its outcomes.events off? Leave out -since for live events", o.subject(), o.Downstream)
	case err != nil:
		return nil, fmt.Errorf("-since reads stored events from JetStream, which did not answer: %w; "+
			"is -nats the daemon's NATS? leave out -since for live events", err)
	}
	start := time.Now().Add(-o.Since)
	cons, err := js.OrderedConsumer(actx, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{o.subject()}, DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &start,
	})
	if err != nil {
		return nil, fmt.Errorf("read the events in stream %s: %w", stream, err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		at := time.Now()
		if md, err := m.Metadata(); err == nil {
			at = md.Timestamp
		}
		deliver(jobEvent{at, m.Headers(), m.Data()})
	})
	if err != nil {
		return nil, fmt.Errorf("read the events in stream %s: %w", stream, err)
	}
	return func() { cc.Stop(); <-cc.Closed() }, nil
}

// writeEvent prints one event: its record as JSON, or a line of time, job
// id, state, attempt and error.
func writeEvent(w io.Writer, e jobEvent, asJSON bool) error {
	if asJSON {
		_, err := fmt.Fprintf(w, "%s\n", strings.TrimSpace(string(e.data)))
		return err
	}
	_, err := fmt.Fprintln(w, eventLine(e))
	return err
}

// eventLine is an event's line; the headers win over the record where
// both say.
func eventLine(e jobEvent) string {
	var rec outcome.Record
	_ = json.Unmarshal(e.data, &rec) // an odd body leaves the headers to speak
	id, state := rec.JobID, string(rec.State)
	if h := e.hdr.Get(producer.HeaderJobID); h != "" {
		id = h
	}
	if h := e.hdr.Get(producer.HeaderState); h != "" {
		state = h
	}
	attempt := rec.Attempts
	if n, err := strconv.Atoi(e.hdr.Get(producer.HeaderAttempt)); err == nil {
		attempt = n
	}
	line := fmt.Sprintf("%s  %-22s  %-9s  attempt %d", e.at.UTC().Format("2006-01-02T15:04:05.000Z"), dash(id), dash(state), attempt)
	if rec.Error != "" {
		line += "  " + oneLine(rec.Error, 200)
	}
	return line
}
