package config

import (
	"maps"
	"slices"
	"strings"
	"time"
)

// Bounds of downstreams.NAME.dead_letters, enforced by Validate.
const (
	MinDeadLetterMaxAge   = time.Minute
	MaxDeadLetterMaxAge   = 8760 * time.Hour // a year
	MaxDeadLetterMaxCount = 10000000
)

// validateDeadLetters checks every downstream's dead-letter store: its
// bounds, and a subject of its own. Each downstream's dead letters are kept
// in a stream bound to its subject, so two downstreams cannot share one,
// and the subject must not be one that carries other messages (a durable
// queue's, a NATS sink's): they would be stored as dead letters.
func (c Config) validateDeadLetters(v validator) {
	names := slices.Sorted(maps.Keys(c.Downstreams))
	owner := map[string]string{} // dead-letter subject → downstream
	sinks := map[string]string{} // sink.nats.subject → downstream
	for _, name := range names {
		if n := c.Downstreams[name].Sink.NATS; n != nil {
			sinks[n.Subject] = name
		}
	}
	queuePrefix := c.NATS.JetStream.SubjectPrefix
	for _, name := range names {
		d, p := c.Downstreams[name], "downstreams."+name+"."
		v.duration(p+"dead_letters.max_age", d.DeadLetters.MaxAge, MinDeadLetterMaxAge, MaxDeadLetterMaxAge)
		v.intRange(p+"dead_letters.max_count", d.DeadLetters.MaxCount, 1, MaxDeadLetterMaxCount)
		k, subject := p+"dead_letter", d.DeadLetterSubject(name)
		if !v.ok(k) || !validName(name) {
			continue
		}
		switch other, shared := owner[subject]; {
		case shared:
			v.add(k, "%q is also the dead-letter subject of downstreams.%s; give each downstream its own (each keeps its dead letters in a stream of its own)", subject, other)
		case sinks[subject] != "":
			v.add(k, "%q is the sink.nats.subject of downstreams.%s, so its deliveries would be stored as dead letters; use another subject", subject, sinks[subject])
		case queuePrefix != "" && (subject == queuePrefix || strings.HasPrefix(subject, queuePrefix+".")):
			v.add(k, "%q is under nats.jetstream.subject_prefix %q, where durable queues keep their jobs; use another subject, e.g. shaper.dead.%s", subject, queuePrefix, name)
		}
		owner[subject] = name
	}
}
