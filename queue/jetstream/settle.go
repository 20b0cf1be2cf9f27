package jetstream

import (
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/queue"
)

// Ack acks job's message at at: until then it
// stays in the stream and counts against the bound, as the slot the job
// started in does in the memory queue, so a burst into an idle downstream
// accepts exactly min(N, capacity) on either backend. A crash while an ack
// is held redelivers that one job (at most the last start per downstream).
func (q *Queue) Ack(job *queue.Job, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	m, ok := q.taken[job]
	if !ok {
		return
	}
	delete(q.taken, job)
	d := time.Until(at)
	if d <= 0 || q.closed {
		q.ackLocked(m)
		return
	}
	q.held[m] = time.AfterFunc(d, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if _, ok := q.held[m]; ok { // else Close acked it already
			q.ackLocked(m)
		}
	})
}

// ackLocked acks m, once its dedupe record is stored, and forgets it.
// Requires q.mu.
func (q *Queue) ackLocked(m natsjs.Msg) {
	delete(q.held, m)
	q.settleLocked(m, false)
}

// RetryLater naks job with the delay until at, so the retry waits in the
// stream (and makes room for itself in the prefetch once due:
// retryWaitsLocked); a pushed-back job is held here (kept alive; a retry of its level
// in the local index) while the lane pauses, so the pushback does not
// count as a delivery.
func (q *Queue) RetryLater(job *queue.Job, at time.Time, pushback bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	m, ok := q.taken[job]
	if !ok {
		return
	}
	delete(q.taken, job)
	switch {
	case pushback && !q.closed:
		q.index.retry(job, m, at)
	case pushback: // after the hand-back: not a try either
		q.handBackLocked([]natsjs.Msg{m})
	case time.Until(at) > 0:
		q.letGoLocked(m)
		q.retryWaitsLocked(m, at)
		_ = m.NakWithDelay(time.Until(at))
	default:
		q.letGoLocked(m)
		q.retryWaitsLocked(m, time.Now())
		_ = m.Nak()
	}
}

// DropFront takes the held jobs at the front while drop returns true
// (queue.Settler): the lane drops expired jobs that hold the stream's room
// while none can start, and settles each with GiveUp once its dead letter
// is published.
func (q *Queue) DropFront(drop func(*queue.Job) bool) []*queue.Job {
	q.mu.Lock()
	defer q.mu.Unlock()
	jobs, msgs := q.index.dropFront(drop)
	for i, job := range jobs {
		q.taken[job] = msgs[i]
	}
	if len(jobs) > 0 {
		q.signal() // room in the prefetch
	}
	return jobs
}

// GiveUp terms job (its dead letter was stored), once its dedupe record
// is stored: the stream deletes it.
func (q *Queue) GiveUp(job *queue.Job) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if m, ok := q.taken[job]; ok {
		delete(q.taken, job)
		q.settleLocked(m, true)
	}
}
