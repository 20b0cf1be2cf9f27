package jetstream

import (
	"sync"
	"time"
)

// MaxRecords bounds the dedupe records a Store keeps in memory (about
// 150 B each with short ids). Past it the oldest are dropped early, and
// until their window would have ended a job whose id is not in the table
// is looked up in the records stream (a round trip) instead: dedupe stays
// exact, intake gets slower.
const MaxRecords = 1 << 20

// recordTable is a Store's copy of the records stream: id → job id of the
// jobs that left their stream within the window, fed by a watch on the
// records stream. Intake looks ids up here instead of in the stream. It is
// safe for concurrent use.
type recordTable struct {
	window time.Duration
	max    int

	mu       sync.Mutex
	byID     map[string]record
	fifo     []arrival // in the order records arrived; head is the first live index
	head     int
	lastSeq  uint64        // the last record's stream sequence seen
	caughtUp bool          // every record stored in the stream so far is here
	caught   chan struct{} // closed while caughtUp; a new one while behind
	partial  time.Time     // until then a miss is no answer (records were dropped for the bound)
}

// record is one id's job and when that job was accepted.
type record struct {
	jobID string
	at    time.Time
	seq   uint64
}

// arrival is a record's place in the FIFO; drop is when it can go: no
// earlier than its window's end, since it arrived after its job's
// acceptance.
type arrival struct {
	id   string
	seq  uint64
	drop time.Time
}

func newRecordTable(window time.Duration, maxRecords int) *recordTable {
	return &recordTable{window: window, max: maxRecords, byID: map[string]record{}, caught: make(chan struct{})}
}

// get returns the job id recorded for id within the window at now. sure
// is false when a miss is no answer: the table has not caught up with the
// records stream (start-up, reconnection), or records were dropped for the
// bound; the caller then asks the stream.
func (t *recordTable) get(now time.Time, id string) (jobID string, found, sure bool) {
	t.mu.Lock()
	r, ok := t.byID[id]
	sure = t.caughtUp && !now.Before(t.partial)
	t.mu.Unlock()
	if ok && now.Sub(r.at) < t.window {
		return r.jobID, true, true
	}
	return "", false, sure
}

// put adds the record of stream sequence seq, which arrived at now;
// pending is the number of records stored after it (0: caught up).
func (t *recordTable) put(now time.Time, seq uint64, id, jobID string, at time.Time, pending uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastSeq = max(t.lastSeq, seq)
	if pending == 0 && !t.caughtUp {
		t.caughtUp = true
		close(t.caught)
	}
	t.expireLocked(now)
	if id == "" || jobID == "" || now.Sub(at) >= t.window {
		return
	}
	t.byID[id] = record{jobID: jobID, at: at, seq: seq}
	t.fifo = append(t.fifo, arrival{id: id, seq: seq, drop: now.Add(t.window)})
	for len(t.byID) > t.max && t.head < len(t.fifo) {
		a := t.fifo[t.head]
		if r, ok := t.byID[a.id]; ok && r.seq == a.seq {
			t.partial = maxTime(t.partial, r.at.Add(t.window))
			delete(t.byID, a.id)
		}
		t.popLocked()
	}
}

// expire forgets the records whose window ended by now.
func (t *recordTable) expire(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expireLocked(now)
}

func (t *recordTable) expireLocked(now time.Time) {
	for t.head < len(t.fifo) && !t.fifo[t.head].drop.After(now) {
		a := t.fifo[t.head]
		if r, ok := t.byID[a.id]; ok && r.seq == a.seq { // else a later record replaced it
			delete(t.byID, a.id)
		}
		t.popLocked()
	}
}

// popLocked drops the FIFO's head, compacting the slice once half of it is
// dead.
func (t *recordTable) popLocked() {
	t.fifo[t.head] = arrival{}
	t.head++
	if t.head == len(t.fifo) {
		t.fifo, t.head = t.fifo[:0], 0
	} else if t.head > 1024 && t.head > len(t.fifo)/2 {
		n := copy(t.fifo, t.fifo[t.head:])
		clear(t.fifo[n:])
		t.fifo, t.head = t.fifo[:n], 0
	}
}

// status returns the last sequence seen and whether the table is caught up.
func (t *recordTable) status() (lastSeq uint64, caughtUp bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastSeq, t.caughtUp
}

// setCaughtUp marks the table caught up (true) or behind the stream.
func (t *recordTable) setCaughtUp(ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case ok && !t.caughtUp:
		close(t.caught)
	case !ok && t.caughtUp:
		t.caught = make(chan struct{})
	}
	t.caughtUp = ok
}

// caughtUpChan returns a channel closed once the table is caught up.
func (t *recordTable) caughtUpChan() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.caught
}

// size is the number of records held.
func (t *recordTable) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
