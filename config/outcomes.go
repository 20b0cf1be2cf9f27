package config

import (
	"encoding/base64"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/shaperd/shaper/shaper/settings"
)

// Defaults and bounds of the outcome keys (ingress.status_prefix,
// ingress.events_prefix, downstreams.NAME.outcomes), enforced by Validate.
const (
	DefaultStatusPrefix = "shaper.status"
	DefaultEventsPrefix = "shaper.events"
	DefaultOutcomesKeep = 24 * time.Hour
	DefaultResultBytes  = 64 << 10
	DefaultMaxRecords   = 100000
	MinOutcomesKeep     = time.Second
	MaxOutcomesKeep     = 90 * 24 * time.Hour
	MaxResultBytes      = 1 << 20
	MaxMaxRecords       = 10000000
)

// settings converts o into the shaper's outcome settings.
func (o Outcomes) settings() settings.Outcomes {
	return settings.Outcomes{Keep: o.Keep, ResultBytes: int(o.ResultBytes), Events: o.Events, MaxRecords: o.MaxRecords}
}

// storeFloor is the least room a jetstream downstream's records and events
// keep in the store: a record and an event of the largest size each (the
// answer's body as base64 in JSON, plus StoreHeadroom for the rest), in
// whole KiB.
func (o Outcomes) storeFloor() int64 {
	one := int64(base64.StdEncoding.EncodedLen(int(o.ResultBytes))) + StoreHeadroom
	return (2*one + 1023) &^ 1023
}

// validateOutcomes checks ingress.status_prefix, ingress.events_prefix
// and every downstream's outcomes keys. The two prefixes are subjects of
// their own: status requests or events under ingress.subject_prefix would
// be taken as jobs, and under nats.jetstream.subject_prefix, a dead-letter
// subject or a NATS sink's subject they would be mixed with other
// messages (and JetStream refuses streams whose subjects overlap).
func (c Config) validateOutcomes(v validator) {
	const sk, ek = "ingress.status_prefix", "ingress.events_prefix"
	in := c.Ingress
	v.subject(sk, in.StatusPrefix, true)
	v.subject(ek, in.EventsPrefix, true)
	statusOK := v.ok(sk) && literalSubject(in.StatusPrefix)
	eventsOK := v.ok(ek) && literalSubject(in.EventsPrefix)
	if statusOK {
		c.notOtherPrefix(v, sk, in.StatusPrefix, "status requests", DefaultStatusPrefix)
	}
	if eventsOK {
		c.notOtherPrefix(v, ek, in.EventsPrefix, "events", DefaultEventsPrefix)
	}
	if statusOK && eventsOK && overlaps(in.StatusPrefix, in.EventsPrefix) {
		v.add(ek, "%q overlaps ingress.status_prefix %q; status requests and events need subjects of their own, e.g. %s",
			in.EventsPrefix, in.StatusPrefix, DefaultEventsPrefix)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Downstreams)) {
		if !validName(name) {
			continue
		}
		p, d := "downstreams."+name+".", c.Downstreams[name]
		d.Outcomes.validate(v, p+"outcomes.")
		if n := d.Sink.NATS; n != nil {
			c.notOutcomeSubject(v, p+"sink.nats.subject", n.Subject, "use another subject")
		}
		if d.DeadLetter != "" {
			c.notOutcomeSubject(v, p+"dead_letter", d.DeadLetter, "use another subject, e.g. shaper.dead."+name)
		}
	}
}

// notOtherPrefix refuses prefix (of key, carrying what) where it overlaps
// ingress.subject_prefix or nats.jetstream.subject_prefix.
func (c Config) notOtherPrefix(v validator, key, prefix, what, example string) {
	in, queue := c.Ingress.SubjectPrefix, c.NATS.JetStream.SubjectPrefix
	switch {
	case in != "" && overlaps(prefix, in):
		v.add(key, "%q overlaps ingress.subject_prefix %q, so %s would be taken as jobs; use another subject, e.g. %s", prefix, in, what, example)
	case queue != "" && overlaps(prefix, queue):
		v.add(key, "%q overlaps nats.jetstream.subject_prefix %q, where durable queues keep their jobs; use another subject, e.g. %s", prefix, queue, example)
	}
}

// notOutcomeSubject refuses a subject the daemon publishes to (key's)
// where it is under ingress.status_prefix or ingress.events_prefix.
func (c Config) notOutcomeSubject(v validator, key, s, hint string) {
	if !v.ok(key) || !literalSubject(s) {
		return
	}
	in := c.Ingress
	switch {
	case v.ok("ingress.status_prefix") && under(s, in.StatusPrefix):
		v.add(key, "%q is under ingress.status_prefix %q, where jobs' status is asked; %s", s, in.StatusPrefix, hint)
	case v.ok("ingress.events_prefix") && under(s, in.EventsPrefix):
		v.add(key, "%q is under ingress.events_prefix %q, where jobs' events are published; %s", s, in.EventsPrefix, hint)
	}
}

func (o Outcomes) validate(v validator, p string) {
	if k := p + "keep"; v.ok(k) && o.Keep != 0 && (o.Keep < MinOutcomesKeep || o.Keep > MaxOutcomesKeep) {
		v.add(k, "must be 0 (no records) or %s..%s (90 days), got %s",
			FormatDuration(MinOutcomesKeep), FormatDuration(MaxOutcomesKeep), FormatDuration(o.Keep))
	}
	if k := p + "result_bytes"; v.ok(k) && (o.ResultBytes < 0 || o.ResultBytes > MaxResultBytes) {
		v.add(k, "must be 0..%s (0 keeps none of the answer's body), got %s", ByteSize(MaxResultBytes), o.ResultBytes)
	}
	if k := p + "events"; v.ok(k) && v.ok(p+"keep") && o.Events && o.Keep == 0 {
		v.add(k, "needs outcomes.keep above 0 (an event carries the job's record, and keep 0 keeps none); set keep, e.g. 24h, or events false")
	}
	v.intRange(p+"max_records", o.MaxRecords, 1, MaxMaxRecords)
}

// literalSubject reports whether s is a subject without wildcards: non-empty
// dot-separated tokens without spaces, * or >.
func literalSubject(s string) bool {
	if s == "" {
		return false
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || strings.ContainsAny(tok, "*>") || strings.ContainsFunc(tok, isSpaceOrCtl) {
			return false
		}
	}
	return true
}

// under reports whether subject s is prefix or below it.
func under(s, prefix string) bool {
	return prefix != "" && (s == prefix || strings.HasPrefix(s, prefix+"."))
}

// overlaps reports whether one of the subject prefixes a and b is the other
// or below it, so that their subjects can meet.
func overlaps(a, b string) bool { return under(a, b) || under(b, a) }
