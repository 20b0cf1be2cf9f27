package daemon

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shaperd/shaper/shaper"
)

// maxWaiting bounds the copies, across all ids, that wait for their first
// copy's answer; past it a copy is refused unavailable (maxWaitingRetry).
const maxWaiting = 65536

// maxWaitingRetry is the Retry-After of a copy refused at maxWaiting.
const maxWaitingRetry = time.Second

// claim is what claim found for a message id.
type claim int

const (
	claimFirst     claim = iota // the caller's job is the id's; settle it
	claimDuplicate              // a job with the id was accepted in the window
	claimWaiting                // a copy is on its way; wait gets its answer
	claimBusy                   // maxWaiting copies wait already
)

// dedupe remembers the job id given to each Nats-Msg-Id for a fixed window,
// and which ids a job is on its way with: an id is claimed when its first
// copy enters the admission path (claim) and settled with that copy's
// answer (settle), remembered only if it was accepted. Copies that arrive
// in between share the first copy's answer, so concurrent copies are never
// queued twice, however long a decision or a store takes.
// Because the window is the same for every entry, insertion order is expiry
// order, so expiry is a walk from the front of a FIFO: O(1) per entry.
// The number of ids held is capped; at the cap the oldest id is forgotten
// early (a duplicate of it would then be queued twice, and is counted).
//
// It is safe for concurrent use.
type dedupe struct {
	mu      sync.Mutex
	window  time.Duration
	max     int
	byID    map[string]string                 // msg id → job id
	pending map[string][]func(shaper.Receipt) // ids on their way → copies waiting
	waiting int                               // copies in pending
	order   []dedupeEntry                     // FIFO, oldest first; head is the first live index
	head    int
	evicted uint64 // ids forgotten before their window ended
	// evictions counts them too (shaper_dedupe_evicted_total); nil = not.
	evictions prometheus.Counter
}

type dedupeEntry struct {
	id      string
	expires time.Time
}

func newDedupe(window time.Duration, max int) *dedupe {
	return &dedupe{window: window, max: max, byID: make(map[string]string),
		pending: make(map[string][]func(shaper.Receipt))}
}

// claim looks msgID up for a job entering the admission path: the job id
// of an accepted copy (claimDuplicate); else, when another copy is on its
// way, wait is kept to get that copy's receipt (claimWaiting), unless
// maxWaiting copies wait already (claimBusy); else the id is now the
// caller's, who must settle it (claimFirst). With a window of 0 every job
// is first and nothing is kept.
func (d *dedupe) claim(now time.Time, msgID string, wait func(shaper.Receipt)) (string, claim) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expire(now)
	if jobID, ok := d.byID[msgID]; ok {
		return jobID, claimDuplicate
	}
	if d.window <= 0 {
		return "", claimFirst
	}
	waiters, onItsWay := d.pending[msgID]
	switch {
	case !onItsWay:
		d.pending[msgID] = nil
		return "", claimFirst
	case d.waiting >= maxWaiting:
		return "", claimBusy
	}
	d.pending[msgID] = append(waiters, wait)
	d.waiting++
	return "", claimWaiting
}

// settle ends msgID's claim with its first copy's receipt: an accepted
// job's id is remembered, a rejected one's is not; then every copy that
// waited gets rc (without d.mu held).
func (d *dedupe) settle(now time.Time, msgID string, rc shaper.Receipt) {
	d.mu.Lock()
	waiters := d.pending[msgID]
	delete(d.pending, msgID)
	d.waiting -= len(waiters)
	if rc.Accepted {
		d.remember(now, msgID, rc.JobID)
	}
	d.mu.Unlock()
	for _, w := range waiters {
		w(rc)
	}
}

// remember records an accepted job's msg id. Requires d.mu.
func (d *dedupe) remember(now time.Time, msgID, jobID string) {
	if d.window <= 0 {
		return
	}
	d.expire(now)
	if _, ok := d.byID[msgID]; ok {
		return
	}
	if len(d.byID) >= d.max {
		d.pop()
		d.evicted++
		if d.evictions != nil {
			d.evictions.Inc()
		}
	}
	d.byID[msgID] = jobID
	d.order = append(d.order, dedupeEntry{id: msgID, expires: now.Add(d.window)})
}

// expire forgets ids whose window ended. expire requires that d.mu is held.
func (d *dedupe) expire(now time.Time) {
	for d.head < len(d.order) && !now.Before(d.order[d.head].expires) {
		d.pop()
	}
}

// pop forgets the oldest id and compacts the FIFO once half of it is dead.
// pop requires that d.mu is held.
func (d *dedupe) pop() {
	if d.head >= len(d.order) {
		return
	}
	delete(d.byID, d.order[d.head].id)
	d.order[d.head] = dedupeEntry{}
	d.head++
	if d.head > 1024 && d.head*2 > len(d.order) {
		d.order = append(d.order[:0], d.order[d.head:]...)
		d.head = 0
	}
}

// setWindow changes the window for ids remembered from now on. After a
// shrink, older entries may outlive the new window by the difference: expiry
// stops at the first live entry, and those are ahead of the new ones.
func (d *dedupe) setWindow(w time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.window = w
}
