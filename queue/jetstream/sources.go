package jetstream

import (
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// source is one subject of a queue's stream as the promoter knows it.
// Requires the queue's mutex.
type source struct {
	subject string
	place
	count   int                    // messages on it, best known
	out     int                    // of them, promoted and still in the stream
	stored  uint64                 // the last sequence this instance stored on it
	cursor  uint64                 // the last sequence read
	buf     []*natsjs.RawStreamMsg // read, waiting for their turn, in order
	deficit int
	visited bool // given its quantum on this visit
	ringed  bool
}

// pending reports whether the source may have a job to promote.
func (s *source) pending() bool { return len(s.buf) > 0 || s.count > s.out+len(s.buf) }

// sources are a queue's subjects, and for each level those that may have
// jobs to promote, in turn; the delayed jobs' subjects, whose jobs are
// promoted as soon as they are read (a delayed job's token waits in the
// window stream and takes no room), apart. Requires the queue's mutex.
type sources struct {
	by      map[string]*source
	ring    [][]*source
	turn    []int
	delayed []*source
}

// configure sets the levels, placing every source again.
func (ss *sources) configure(base string, levels int) {
	if ss.by == nil {
		ss.by = map[string]*source{}
	}
	ss.ring, ss.turn, ss.delayed = make([][]*source, levels), make([]int, levels), nil
	for _, s := range ss.by {
		s.place, s.ringed, s.visited = placeOf(base, s.subject, levels), false, false
		ss.ringLocked(s)
	}
}

// get returns subject's source, made if new.
func (ss *sources) get(base, subject string) *source {
	s, ok := ss.by[subject]
	if !ok {
		s = &source{subject: subject, place: placeOf(base, subject, len(ss.ring))}
		ss.by[subject] = s
	}
	return s
}

// ringLocked puts s in its level's turn (a delayed subject: with the
// delayed ones) when it may have jobs to promote.
func (ss *sources) ringLocked(s *source) {
	switch {
	case s.ringed || !s.pending():
	case s.delayed:
		s.ringed = true
		ss.delayed = append(ss.delayed, s)
	case s.level < len(ss.ring):
		s.ringed = true
		ss.ring[s.level] = append(ss.ring[s.level], s)
	}
}

// nextDelayed is a delayed subject that may have jobs to promote (nil:
// none), the ones with none dropped on the way.
func (ss *sources) nextDelayed() *source {
	for len(ss.delayed) > 0 {
		s := ss.delayed[0]
		if s.pending() {
			return s
		}
		s.ringed = false
		ss.delayed[0] = nil
		ss.delayed = ss.delayed[1:]
	}
	return nil
}

// current is the source whose turn it is: of the most urgent level with a
// source that may have a job, the one the round robin is at, given its
// weight when its visit begins. Nil: none.
func (ss *sources) current(weight func(string) int) *source {
	for l := range ss.ring {
		r := ss.ring[l]
		for len(r) > 0 {
			i := ss.turn[l] % len(r)
			s := r[i]
			if !s.pending() {
				s.ringed, s.visited, s.deficit = false, false, 0
				r = append(r[:i], r[i+1:]...)
				ss.ring[l] = r
				continue
			}
			ss.turn[l] = i
			if !s.visited {
				s.visited = true
				s.deficit += weight(s.key)
			}
			return s
		}
	}
	return nil
}

// pass ends s's visit: the turn goes to the next source of its level.
func (ss *sources) pass(s *source) {
	s.visited = false
	if s.level < len(ss.turn) {
		ss.turn[s.level]++
	}
}

// alone reports whether s is the only source of its level that may have
// jobs (then it needs no deficit: nothing else could go first).
func (ss *sources) alone(s *source) bool {
	return s.level < len(ss.ring) && len(ss.ring[s.level]) == 1
}

// refreshed takes the stream's per-subject counts, answered with the
// stream's last sequence: a subject this instance stored on since keeps
// at least one job more; a subject with nothing known is forgotten.
func (ss *sources) refreshed(base string, counts map[string]uint64, lastSeq uint64) {
	for subj, n := range counts {
		ss.get(base, subj).count = int(n)
	}
	for subj, s := range ss.by {
		if _, ok := counts[subj]; !ok {
			s.count = 0
		}
		if s.stored > lastSeq {
			s.count++
		}
		s.out = min(s.out, s.count)
		if s.count == 0 && len(s.buf) == 0 && !s.ringed {
			delete(ss.by, subj)
			continue
		}
		ss.ringLocked(s)
	}
}

// reset forgets the cursors: every job of the stream may be promoted
// again (a duplicate token is stored once, and dropped by the fetcher).
func (ss *sources) reset() {
	for _, s := range ss.by {
		s.cursor, s.out, s.buf = 0, 0, nil
		ss.ringLocked(s)
	}
}
