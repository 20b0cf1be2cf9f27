package jetstream

import (
	"context"
	"errors"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
)

// round is the tokens of one pickLocked, stored asynchronously: the
// promoter goes on while their PubAcks come.
type round struct {
	picks []pick
	futs  []natsjs.PubAckFuture // nil: not sent
	next  int                   // the first future not answered yet
}

// maxRounds bounds the rounds whose PubAcks are awaited at once.
const maxRounds = 8

// sendTokens stores the picks' tokens (a job due more than the lead ahead
// gets its level's delayed token) without waiting for their PubAcks
// (settleRounds checks them).
func (q *Queue) sendTokens(picks []pick) {
	now := time.Now()
	r := round{picks: picks, futs: make([]natsjs.PubAckFuture, len(picks))}
	for i, p := range picks {
		subj := q.st.windowSubject(q.name)
		if unixNano(p.job.Header.Get(hdrNotBefore)).After(now.Add(delayLead)) {
			subj = q.st.delayedSubject(q.name, p.src.level)
		}
		f, err := q.st.js.PublishMsgAsync(q.st.token(subj, q.name, p.job.Sequence, ""))
		if err != nil {
			break // the rest stay nil: failed
		}
		r.futs[i] = f
	}
	q.pro.rounds = append(q.pro.rounds, r)
}

// settleRounds checks the rounds' PubAcks in order: those answered by
// now, or all of them (waiting at most RequestTimeout) when wait. A token
// not stored undoes its pick and every pick after it of its source, in
// its round and the later ones (see undo). It reports whether every
// token checked was stored.
func (q *Queue) settleRounds(wait bool) bool {
	var deadline <-chan time.Time
	if wait {
		t := time.NewTimer(RequestTimeout)
		defer t.Stop()
		deadline = t.C
	}
	for len(q.pro.rounds) > 0 {
		r := &q.pro.rounds[0]
		for ; r.next < len(r.futs); r.next++ {
			f := r.futs[r.next]
			if f == nil {
				q.undo(errors.New("not sent"))
				return false
			}
			var err error
			if wait {
				select {
				case <-f.Ok():
				case err = <-f.Err():
				case <-deadline:
					err = context.DeadlineExceeded
				case <-q.ctx.Done():
					err = q.ctx.Err()
				}
			} else {
				select {
				case <-f.Ok():
				case err = <-f.Err():
				default:
					return true // not answered yet
				}
			}
			if err != nil {
				q.undo(err)
				return false
			}
		}
		q.pro.rounds[0] = round{}
		q.pro.rounds = q.pro.rounds[1:]
	}
	return true
}

// undo forgets the picks of the first round from its first unanswered
// token on, and those of the later rounds: each source concerned is read
// again from the first of them (the tokens stored meanwhile are answered
// as duplicates then, and the fetcher drops a second token of a job).
func (q *Queue) undo(err error) {
	q.st.log.Debug("jetstream promotion failed; retrying", "stream", q.stream, "error", err.Error())
	var undone []pick
	for i, r := range q.pro.rounds {
		if i == 0 {
			undone = append(undone, r.picks[r.next:]...)
			continue
		}
		undone = append(undone, r.picks...)
	}
	q.pro.rounds = q.pro.rounds[:0]
	q.mu.Lock()
	defer q.mu.Unlock()
	first := map[*source]uint64{}
	for _, p := range undone {
		if f, seen := first[p.src]; !seen || p.job.Sequence < f {
			first[p.src] = p.job.Sequence
		}
	}
	for _, p := range undone {
		delete(q.pro.promoted, p.job.Sequence)
		p.src.out = max(p.src.out-1, 0)
	}
	for src, f := range first {
		q.pro.buffered -= len(src.buf)
		src.buf, src.cursor = nil, min(src.cursor, f-1)
		q.pro.srcs.ringLocked(src)
	}
}
