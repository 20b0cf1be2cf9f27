package daemon

import (
	"sync"
	"time"
)

// dedupe remembers the job id given to each Nats-Msg-Id for a fixed window.
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
	byID    map[string]string // msg id → job id
	order   []dedupeEntry     // FIFO, oldest first; head is the first live index
	head    int
	evicted uint64 // ids forgotten before their window ended
}

type dedupeEntry struct {
	id      string
	expires time.Time
}

func newDedupe(window time.Duration, max int) *dedupe {
	return &dedupe{window: window, max: max, byID: make(map[string]string)}
}

// lookup returns the job id of a live msg id.
func (d *dedupe) lookup(now time.Time, msgID string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expire(now)
	jobID, ok := d.byID[msgID]
	return jobID, ok
}

// remember records an accepted job's msg id.
func (d *dedupe) remember(now time.Time, msgID, jobID string) {
	d.mu.Lock()
	defer d.mu.Unlock()
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

// len returns the number of ids held.
func (d *dedupe) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.byID)
}

// setWindow changes the window for ids remembered from now on. After a
// shrink, older entries may outlive the new window by the difference: expiry
// stops at the first live entry, and those are ahead of the new ones.
func (d *dedupe) setWindow(w time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.window = w
}
