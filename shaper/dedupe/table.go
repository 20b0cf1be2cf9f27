package dedupe

import (
	"sync"
	"time"
)

// MaxWaiting bounds the copies, across all ids, that wait for their first
// copy's answer; past it Claim answers Busy.
const MaxWaiting = 65536

// Claim is what Table.Claim found for a message id.
type Claim int

const (
	First     Claim = iota // the caller's job is the id's; settle it
	Duplicate              // a job with the id was accepted in the window
	Waiting                // a copy is on its way; wait gets its answer
	Busy                   // MaxWaiting copies wait already
)

// Settings configure a Table.
type Settings struct {
	// Window is how long an accepted id is remembered; 0 or less
	// remembers nothing, and every job is first.
	Window time.Duration
	// MaxIDs caps the ids held; at the cap the oldest id is forgotten
	// early (a duplicate of it would then be queued twice).
	MaxIDs int
	// OnEvict, if not nil, is called for each id forgotten early, with
	// the table's lock held: it must be quick and must not call the table.
	OnEvict func()
}

// Table remembers the job id given to each message id for a fixed window,
// and which ids a job is on its way with: an id is claimed when its first
// copy enters the admission path (Claim) and settled with that copy's
// answer (Settle), remembered only if it was accepted. Copies that arrive
// in between share the first copy's answer, so concurrent copies are never
// queued twice, however long a decision or a store takes.
//
// A is the answer a job gets; accepted, given to New, says whether an
// answer accepted the job and under which job id.
//
// Because the window is the same for every entry, insertion order is expiry
// order, so expiry is a walk from the front of a FIFO: O(1) per entry.
//
// It is safe for concurrent use.
type Table[A any] struct {
	accepted func(A) (jobID string, ok bool)
	onEvict  func()

	mu      sync.Mutex
	window  time.Duration
	max     int
	byID    map[string]string    // msg id → job id
	pending map[string][]func(A) // ids on their way → copies waiting
	waiting int                  // copies in pending
	order   []entry              // FIFO, oldest first; head is the first live index
	head    int
	evicted uint64 // ids forgotten before their window ended
}

type entry struct {
	id      string
	expires time.Time
}

// New returns an empty table. accepted reports whether an answer accepted
// its job, and the job's id if so.
func New[A any](set Settings, accepted func(A) (jobID string, ok bool)) *Table[A] {
	return &Table[A]{accepted: accepted, onEvict: set.OnEvict, window: set.Window, max: set.MaxIDs,
		byID: make(map[string]string), pending: make(map[string][]func(A))}
}

// Claim looks msgID up for a job entering the admission path: the job id
// of an accepted copy (Duplicate); else, when another copy is on its way,
// wait is kept to get that copy's answer (Waiting), unless MaxWaiting
// copies wait already (Busy); else the id is now the caller's, who must
// settle it (First). With a window of 0 every job is first and nothing is
// kept.
func (t *Table[A]) Claim(now time.Time, msgID string, wait func(A)) (string, Claim) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire(now)
	if jobID, ok := t.byID[msgID]; ok {
		return jobID, Duplicate
	}
	if t.window <= 0 {
		return "", First
	}
	waiters, onItsWay := t.pending[msgID]
	switch {
	case !onItsWay:
		t.pending[msgID] = nil
		return "", First
	case t.waiting >= MaxWaiting:
		return "", Busy
	}
	t.pending[msgID] = append(waiters, wait)
	t.waiting++
	return "", Waiting
}

// Settle ends msgID's claim with its first copy's answer: an accepted
// job's id is remembered, a rejected one's is not; then every copy that
// waited gets a (without the table's lock held).
func (t *Table[A]) Settle(now time.Time, msgID string, a A) {
	t.mu.Lock()
	waiters := t.pending[msgID]
	delete(t.pending, msgID)
	t.waiting -= len(waiters)
	if jobID, ok := t.accepted(a); ok {
		t.remember(now, msgID, jobID)
	}
	t.mu.Unlock()
	for _, w := range waiters {
		w(a)
	}
}

// remember records an accepted job's msg id. remember requires that t.mu
// is held.
func (t *Table[A]) remember(now time.Time, msgID, jobID string) {
	if t.window <= 0 {
		return
	}
	t.expire(now)
	if _, ok := t.byID[msgID]; ok {
		return
	}
	if len(t.byID) >= t.max {
		t.pop()
		t.evicted++
		if t.onEvict != nil {
			t.onEvict()
		}
	}
	t.byID[msgID] = jobID
	t.order = append(t.order, entry{id: msgID, expires: now.Add(t.window)})
}

// expire forgets ids whose window ended. expire requires that t.mu is held.
func (t *Table[A]) expire(now time.Time) {
	for t.head < len(t.order) && !now.Before(t.order[t.head].expires) {
		t.pop()
	}
}

// pop forgets the oldest id and compacts the FIFO once half of it is dead.
// pop requires that t.mu is held.
func (t *Table[A]) pop() {
	if t.head >= len(t.order) {
		return
	}
	delete(t.byID, t.order[t.head].id)
	t.order[t.head] = entry{}
	t.head++
	if t.head > 1024 && t.head*2 > len(t.order) {
		t.order = append(t.order[:0], t.order[t.head:]...)
		t.head = 0
	}
}

// SetWindow changes the window for ids remembered from now on. After a
// shrink, older entries may outlive the new window by the difference: expiry
// stops at the first live entry, and those are ahead of the new ones.
func (t *Table[A]) SetWindow(w time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.window = w
}
