package outcome

import (
	"context"
	"sync"
	"time"
)

// DefaultMaxRecords bounds a Memory store's records per downstream when
// its settings give no bound.
const DefaultMaxRecords = 100_000

// MaxMemoryBytes bounds the memory a Memory store's records of one
// downstream take (their answers' bodies and recordOverhead each): past
// it, as past its count, the oldest finished records go. 100 000 records
// of a downstream that answers 64 KiB would otherwise hold 6 GiB.
const MaxMemoryBytes = 64 << 20

// recordOverhead is what a record costs besides its answer's body: its
// fields, its map entry and its place in the order, roughly.
const recordOverhead = 400

// Memory is a Store in this process: per downstream at most a bound of
// records (MaxRecords), past which the oldest finished ones go; a finished
// record also goes once its keep has passed. A queued job's record is
// never discarded for room. Safe for concurrent use.
type Memory struct {
	now func() time.Time

	mu    sync.Mutex
	lanes map[string]*memLane
	// discarded is called (without the lock) with the records discarded
	// for room, by downstream.
	discarded func(downstream string, n int)
}

// memLane is one downstream's records: all of them by id, and the
// finished ones in the order they ended (which is the order they expire,
// for one keep).
type memLane struct {
	max      int
	bytes    int64 // the records' size (memSize)
	byID     map[string]*memRec
	finished []*memRec // a FIFO: finished[head:] are live or stale
	head     int
}

// memRec is a stored record and whether it sits in finished.
type memRec struct {
	rec     Record
	expires time.Time // zero until finished
	gone    bool      // replaced or removed: skipped in finished
}

// NewMemory returns an empty Memory store; discarded (may be nil) is told
// how many records of a downstream were discarded for room.
func NewMemory(discarded func(downstream string, n int)) *Memory {
	return &Memory{now: time.Now, lanes: map[string]*memLane{}, discarded: discarded}
}

// SetMax bounds downstream's records (0: DefaultMaxRecords).
func (m *Memory) SetMax(downstream string, max int) {
	if max <= 0 {
		max = DefaultMaxRecords
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lane(downstream).max = max
}

// lane returns downstream's records, creating them. Requires m.mu.
func (m *Memory) lane(downstream string) *memLane {
	l := m.lanes[downstream]
	if l == nil {
		l = &memLane{max: DefaultMaxRecords, byID: map[string]*memRec{}}
		m.lanes[downstream] = l
	}
	return l
}

// Put stores entries (Store).
func (m *Memory) Put(_ context.Context, entries []Entry) error {
	now := m.now()
	var dropped map[string]int
	m.mu.Lock()
	for _, e := range entries {
		l := m.lane(e.Record.Downstream)
		if e.Max > 0 {
			l.max = e.Max
		}
		if n := l.put(e, now); n > 0 {
			if dropped == nil {
				dropped = map[string]int{}
			}
			dropped[e.Record.Downstream] += n
		}
	}
	m.mu.Unlock()
	if m.discarded != nil {
		for ds, n := range dropped {
			m.discarded(ds, n)
		}
	}
	return nil
}

// putOne stores e, as Put does.
func (m *Memory) putOne(e Entry) {
	now := m.now()
	m.mu.Lock()
	l := m.lane(e.Record.Downstream)
	if e.Max > 0 {
		l.max = e.Max
	}
	n := l.put(e, now)
	m.mu.Unlock()
	if n > 0 && m.discarded != nil {
		m.discarded(e.Record.Downstream, n)
	}
}

// Get returns a record (Store).
func (m *Memory) Get(_ context.Context, downstream, id string) (Record, bool, error) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.lanes[downstream]
	if l == nil {
		return Record{}, false, nil
	}
	r := l.byID[id]
	if r == nil || (!r.expires.IsZero() && !now.Before(r.expires)) {
		return Record{}, false, nil
	}
	return r.rec, true, nil
}

// Len is the number of downstream's records (expired ones not yet swept
// included).
func (m *Memory) Len(downstream string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := m.lanes[downstream]; l != nil {
		return len(l.byID)
	}
	return 0
}

// put stores e at now and returns how many records went for room.
func (l *memLane) put(e Entry, now time.Time) (discarded int) {
	id := e.Record.JobID
	if old := l.byID[id]; old != nil {
		old.gone = true
		l.bytes -= memSize(&old.rec)
	}
	r := &memRec{rec: e.Record}
	l.byID[id] = r
	l.bytes += memSize(&r.rec)
	if e.Record.State.Final() {
		r.expires = now.Add(e.Keep)
		l.finished = append(l.finished, r)
	}
	l.sweep(now)
	for (len(l.byID) > l.max || l.bytes > MaxMemoryBytes) && l.popFinished() {
		discarded++
	}
	return discarded
}

// sweep removes the finished records whose keep has passed, oldest first.
func (l *memLane) sweep(now time.Time) {
	for l.head < len(l.finished) {
		r := l.finished[l.head]
		if !r.gone && now.Before(r.expires) {
			return
		}
		l.popFinished()
	}
}

// popFinished removes the oldest finished record and reports whether one
// was there.
func (l *memLane) popFinished() bool {
	for l.head < len(l.finished) {
		r := l.finished[l.head]
		l.finished[l.head] = nil
		l.head++
		if l.head > 1024 && l.head*2 > len(l.finished) { // compact
			l.finished = append(l.finished[:0:0], l.finished[l.head:]...)
			l.head = 0
		}
		if r.gone {
			continue
		}
		delete(l.byID, r.rec.JobID)
		l.bytes -= memSize(&r.rec)
		return true
	}
	return false
}

// memSize is what rec costs a Memory store.
func memSize(rec *Record) int64 {
	n := int64(recordOverhead + len(rec.Error))
	if rec.Result != nil {
		n += int64(len(rec.Result.Body))
	}
	return n
}
