package jetstream

import (
	"container/heap"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/queue"
)

// Ack acks job's message at at: until then it
// stays in the stream and counts against the bound, as the slot the job
// started in does in the memory queue, so a burst into an idle downstream
// accepts exactly min(N, capacity) on either backend. A crash while an ack
// is held redelivers that one job (at most the last start per downstream).
// The held acks share one timer (heldAcks).
func (q *Queue) Ack(job *queue.Job, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	m, ok := q.hold.taken[job]
	if !ok {
		return
	}
	delete(q.hold.taken, job)
	if !at.After(time.Now()) || q.closed {
		q.ackLocked(m)
		return
	}
	q.hold.acks.hold(m, at, q.ackDue)
}

// ackDue acks the held acks due by now (heldAcks' timer).
func (q *Queue) ackDue() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range q.hold.acks.due(time.Now()) {
		q.ackLocked(m)
	}
}

// ackLocked acks m, once its dedupe record is stored, and forgets it.
// Requires q.mu.
func (q *Queue) ackLocked(m natsjs.Msg) {
	q.hold.acks.forget(m)
	q.settleLocked(m, false)
}

// heldAcks are the acks held to the ends of their jobs' slots, in the
// order they are due, on one timer for all of them. Requires the queue's
// mutex.
type heldAcks struct {
	at    map[natsjs.Msg]time.Time
	order heldHeap
	t     *time.Timer
}

// len is the number of held acks.
func (h *heldAcks) len() int { return len(h.at) }

// hold holds m's ack until at; fire is called (without the queue's lock)
// when the earliest held ack is due.
func (h *heldAcks) hold(m natsjs.Msg, at time.Time, fire func()) {
	if h.at == nil {
		h.at = map[natsjs.Msg]time.Time{}
	}
	h.at[m] = at
	heap.Push(&h.order, heldAck{m, at})
	if h.order[0].m != m {
		return // an earlier one is due first: the timer is set for it
	}
	if h.t == nil {
		h.t = time.AfterFunc(time.Until(at), fire)
		return
	}
	h.t.Reset(time.Until(at))
}

// due takes the held acks due at now, earliest first, and sets the timer
// for the next.
func (h *heldAcks) due(now time.Time) []natsjs.Msg {
	var out []natsjs.Msg
	for len(h.order) > 0 && !h.order[0].at.After(now) {
		a := heap.Pop(&h.order).(heldAck)
		if at, ok := h.at[a.m]; ok && at.Equal(a.at) { // else acked already
			delete(h.at, a.m)
			out = append(out, a.m)
		}
	}
	if len(h.order) > 0 && h.t != nil {
		h.t.Reset(time.Until(h.order[0].at))
	}
	return out
}

// forget drops m's held ack (acked now).
func (h *heldAcks) forget(m natsjs.Msg) { delete(h.at, m) }

// all returns every held ack and forgets them (Close acks them now).
func (h *heldAcks) all() []natsjs.Msg {
	out := make([]natsjs.Msg, 0, len(h.at))
	for m := range h.at {
		out = append(out, m)
	}
	clear(h.at)
	h.order = h.order[:0]
	if h.t != nil {
		h.t.Stop()
	}
	return out
}

type heldAck struct {
	m  natsjs.Msg
	at time.Time
}

// heldHeap is a min-heap of held acks by the instant they are due.
type heldHeap []heldAck

func (h heldHeap) Len() int           { return len(h) }
func (h heldHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h heldHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *heldHeap) Push(x any)        { *h = append(*h, x.(heldAck)) }
func (h *heldHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = heldAck{}
	*h = old[:len(old)-1]
	return x
}

// RetryLater naks job with the delay until at, so the retry waits in the
// stream (and makes room for itself in the prefetch once due:
// retryWaitsLocked); a pushed-back job is held here (kept alive; a retry of its level
// in the local index) while the lane pauses, so the pushback does not
// count as a delivery.
func (q *Queue) RetryLater(job *queue.Job, at time.Time, pushback bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	m, ok := q.hold.taken[job]
	if !ok {
		return
	}
	delete(q.hold.taken, job)
	switch {
	case pushback && !q.closed:
		q.hold.index.retry(job, m, at)
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
	jobs, msgs := q.hold.index.dropFront(drop)
	for i, job := range jobs {
		q.hold.taken[job] = msgs[i]
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
	if m, ok := q.hold.taken[job]; ok {
		delete(q.hold.taken, job)
		q.settleLocked(m, true)
	}
}
