package jetstream

import (
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/shaperd/shaper/queue"
)

// Subjects of a queue's stream, under its subject <SubjectPrefix>.D (see
// the package doc's Layout): the least urgent level's jobs (and every job
// of a queue with one level and no fairness) on .D itself, level L of the
// more urgent ones on .D.p<L>, and under fairness each key's jobs on
// .D.k.<token>, the key in base64url without padding.
const (
	levelToken = ".p"
	keyToken   = ".k."
	// emptyKeyToken is the token of the key "": never a key's base64url
	// (one byte encodes to two characters).
	emptyKeyToken = "_"
)

// subjects are the stream's subjects: .D and everything under it.
func (st *Store) subjects(downstream string) []string {
	base := st.Subject(downstream)
	return []string{base, base + ".>"}
}

// keySubject is the subject of key's jobs under fairness.
func keySubject(base, key string) string {
	if key == "" {
		return base + keyToken + emptyKeyToken
	}
	return base + keyToken + base64.RawURLEncoding.EncodeToString([]byte(key))
}

// levelSubject is the subject of level l's jobs in a queue of levels
// levels (no fairness).
func levelSubject(base string, l, levels int) string {
	if l >= levels-1 {
		return base
	}
	return base + levelToken + strconv.Itoa(l)
}

// subjectFor is the subject job is stored on.
func (q *Queue) subjectFor(job *queue.Job) string {
	if q.fair {
		return keySubject(q.subject, job.Key)
	}
	levels := int(q.levelsNow.Load())
	if levels <= 1 {
		return q.subject
	}
	return levelSubject(q.subject, queue.Level(job, levels), levels)
}

// levelOfSubject is the level a message stored on subj counts in, of
// levels levels: its .p<L>, else the least urgent (a job of .D, of a key's
// subject, or of a level past the levels: the config has fewer since).
func levelOfSubject(base, subj string, levels int) int {
	rest, ok := strings.CutPrefix(subj, base+levelToken)
	if !ok {
		return levels - 1
	}
	l, err := strconv.Atoi(rest)
	if err != nil || l < 0 || l >= levels {
		return levels - 1
	}
	return l
}
