package jetstream

import (
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
)

// retryLag is how long after a retry's backoff ends the fetcher pulls it:
// the server's redelivery timer runs from when the nak reached it, a
// little after it was sent, and a pull that comes first is served a newer
// job instead.
const retryLag = 20 * time.Millisecond

// waitingRetry is a job nak'ed to wait out its backoff in the stream, as
// the fetcher knows it until it is fetched again.
type waitingRetry struct {
	t   *time.Timer
	due bool // its backoff ended: room in the prefetch
}

// retryWaitsLocked books m, nak'ed to be redelivered at at, as a retry
// waiting in the stream: once it is due it is room for one more job in
// the prefetch, and the fetcher is woken, so that the retry is fetched
// while the newer jobs fetched meanwhile wait, and the local index starts
// it first (a retry goes ahead of newer jobs, as in the memory queue). It
// stays room until it is fetched, or for one pull's wait at most (the
// server may have handed it to another instance). Requires q.mu.
func (q *Queue) retryWaitsLocked(m natsjs.Msg, at time.Time) {
	if q.closed {
		return
	}
	md, err := m.Metadata()
	if err != nil {
		return
	}
	seq := md.Sequence.Stream
	if old, ok := q.hold.retries[seq]; ok { // not fetched since: forget the old wait
		q.forgetRetryLocked(seq, old)
	}
	r := &waitingRetry{}
	r.t = time.AfterFunc(time.Until(at)+retryLag, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		switch {
		case q.hold.retries[seq] != r: // fetched, or Close forgot it
		case r.due: // not fetched within a pull's wait
			q.forgetRetryLocked(seq, r)
		default:
			r.due = true
			q.hold.retriesDue++
			r.t.Reset(q.fetchWait())
			q.signal()
		}
	})
	q.hold.retries[seq] = r
}

// retryFetchedLocked forgets the retry waiting as seq, fetched again.
// Requires q.mu.
func (q *Queue) retryFetchedLocked(seq uint64) {
	if r, ok := q.hold.retries[seq]; ok {
		q.forgetRetryLocked(seq, r)
	}
}

// forgetRetryLocked forgets the waiting retry r of seq. Requires q.mu.
func (q *Queue) forgetRetryLocked(seq uint64, r *waitingRetry) {
	r.t.Stop()
	if r.due {
		q.hold.retriesDue--
	}
	delete(q.hold.retries, seq)
}

// forgetRetriesLocked forgets every waiting retry (Close). Requires q.mu.
func (q *Queue) forgetRetriesLocked() {
	for seq, r := range q.hold.retries {
		q.forgetRetryLocked(seq, r)
	}
}
