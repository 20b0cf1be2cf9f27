package jetstream

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/shaperd/shaper/queue"
)

// Subjects of a queue's stream, under its subject <SubjectPrefix>.D (see
// the package doc's Layout): the least urgent level's jobs (and every job
// of a queue with one level and no fairness) on .D itself, level L of the
// more urgent ones on .D.p<L>; under fairness each key's jobs on
// .D.k.<token> (the least urgent level) and .D.k.<token>.p<L>, the key in
// base64url without padding. A subject is what the drain reads in order
// (the next job of a level, or of a key at a level), so it names both.
const (
	levelToken   = ".p"
	delayedToken = ".d" // a delayed job's subject: <base>.d<L>"
	keyToken     = ".k."
	// emptyKeyToken is the token of the key "": never a key's base64url
	// (one byte encodes to two characters).
	emptyKeyToken = "_"
)

// subjects are the stream's subjects: .D and everything under it.
func (st *Store) subjects(downstream string) []string {
	base := st.Subject(downstream)
	return []string{base, base + ".>"}
}

// keySubject is the subject of key's jobs under fairness, at the least
// urgent level.
func keySubject(base, key string) string {
	if key == "" {
		return base + keyToken + emptyKeyToken
	}
	return base + keyToken + base64.RawURLEncoding.EncodeToString([]byte(key))
}

// levelSubject is the subject of level l's jobs in a queue of levels
// levels, under base (.D, or a key's subject under fairness).
func levelSubject(base string, l, levels int) string {
	if l >= levels-1 {
		return base
	}
	return base + levelToken + strconv.Itoa(l)
}

// subjectFor is the subject job is stored on, at now: a job whose instant
// is more than delayLead ahead on its level's delayed subject (.d<L>,
// under its key's subject under fairness), so that the stream's counts
// say how many jobs wait for their instant.
func (q *Queue) subjectFor(job *queue.Job, now time.Time) string {
	base := q.subject
	if q.fair {
		base = keySubject(q.subject, job.Key)
	}
	levels := max(int(q.levelsNow.Load()), 1)
	if job.NotBefore.After(now.Add(delayLead)) {
		return base + delayedToken + strconv.Itoa(queue.Level(job, levels))
	}
	if levels == 1 {
		return base
	}
	return levelSubject(base, queue.Level(job, levels), levels)
}

// place is where a subject of a queue's stream puts its jobs in the
// order: a level and, under fairness, a key.
type place struct {
	level   int
	key     string
	keyed   bool // a key's subject (fairness)
	delayed bool // a delayed job's subject (.d<L>)
}

// placeOf parses subj, a subject under base, for a queue of levels
// levels: its .p<L>, else the least urgent level (.D, a key's subject, or
// a level past the levels: the config has fewer since); and its key.
func placeOf(base, subj string, levels int) place {
	p := place{level: levels - 1}
	rest, ok := strings.CutPrefix(subj, base)
	if !ok {
		return p
	}
	if tok, ok := strings.CutPrefix(rest, keyToken); ok {
		tok, rest, _ = strings.Cut(tok, ".")
		if rest != "" {
			rest = "." + rest
		}
		p.keyed = true
		if tok != emptyKeyToken {
			if k, err := base64.RawURLEncoding.DecodeString(tok); err == nil {
				p.key = string(k)
			}
		}
	}
	if l, err := strconv.Atoi(strings.TrimPrefix(rest, delayedToken)); err == nil && strings.HasPrefix(rest, delayedToken) && l >= 0 {
		p.level, p.delayed = min(l, levels-1), true
		return p
	}
	if l, err := strconv.Atoi(strings.TrimPrefix(rest, levelToken)); err == nil && strings.HasPrefix(rest, levelToken) && l >= 0 && l < levels {
		p.level = l
	}
	return p
}

// levelOfSubject is the level a message stored on subj counts in, of
// levels levels (placeOf).
func levelOfSubject(base, subj string, levels int) int {
	return placeOf(base, subj, levels).level
}
