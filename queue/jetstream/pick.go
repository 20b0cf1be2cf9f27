package jetstream

import (
	"time"

	"github.com/shaperd/shaper/queue"
)

// NextReadyIf is NextReady over the held jobs whose key may start
// (queue.Picker): the first such pushed-back job, else the first such
// fetched one. Jobs of keys that may not stay where they are, kept alive
// with the rest; while the prefetch holds only such jobs, the lane waits.
func (q *Queue) NextReadyIf(may func(key string) bool) (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if i := firstIf(q.pb, may); i >= 0 {
		return q.pb[i].at, true
	}
	if i := firstIf(q.buf, may); i >= 0 {
		return q.buf[i].at, true
	}
	return time.Time{}, false
}

// TakeIf is Take of the first held job, in Take's order, whose key may
// start (queue.Picker); the jobs passed over keep their places.
func (q *Queue) TakeIf(now time.Time, may func(key string) bool) (*queue.Job, time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var h held
	if i := firstIf(q.pb, may); i >= 0 && !q.pb[i].at.After(now) {
		h, q.pb = removeAt(q.pb, i)
	} else if i := firstIf(q.buf, may); i >= 0 {
		h, q.buf = removeAt(q.buf, i)
	} else {
		return nil, time.Time{}, false
	}
	q.taken[h.job] = h.msg
	q.signal()
	return h.job, h.at, true
}

// firstIf is the index of the first of hs whose key may start, or -1.
func firstIf(hs []held, may func(string) bool) int {
	for i, h := range hs {
		if may == nil || may(h.job.Key) {
			return i
		}
	}
	return -1
}

// removeAt removes hs[i], keeping the others' order.
func removeAt(hs []held, i int) (held, []held) {
	h := hs[i]
	copy(hs[i:], hs[i+1:])
	hs[len(hs)-1] = held{} // let the job be collected
	return h, hs[:len(hs)-1]
}
