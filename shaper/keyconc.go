package shaper

import (
	"time"

	"github.com/shaperd/shaper/queue"
)

// keyFlight is per-key concurrency (Policies.KeyConcurrency): the tries in
// flight per admission key, so that the lane's drain passes over the jobs
// of a key at its cap (queue.Picker) while other keys' jobs start. Only
// keys with a try in flight are held, so it is bounded by Concurrency.
// With no cap it counts nothing and the lane drains in plain order.
// Guarded by lane.mu.
type keyFlight struct {
	max int            // the cap; 0 = none
	n   map[string]int // key → tries in flight, while max > 0
	// may is mayStart, bound once by newLane.
	may func(key string) bool
}

// setMax applies a new cap. Tries started while there was none are not
// counted: the cap holds from the next starts on.
func (k *keyFlight) setMax(n int) {
	k.max = n
	if n == 0 {
		k.n = nil
	} else if k.n == nil {
		k.n = map[string]int{}
	}
}

// mayStart reports whether a job of key may start: its key has fewer than
// the cap's tries in flight.
func (k *keyFlight) mayStart(key string) bool { return k.n[key] < k.max }

// started counts job's try in flight.
func (k *keyFlight) started(job *queue.Job) {
	if k.max > 0 {
		k.n[job.Key]++
	}
}

// finished counts job's try done and reports whether its key was at the
// cap (a job of the key may have waited: the lane's schedule restarts).
func (k *keyFlight) finished(job *queue.Job) (wasAtCap bool) {
	if k.n == nil { // no cap: no lookup on the hot path
		return false
	}
	c, ok := k.n[job.Key]
	if !ok { // started before the cap was set
		return false
	}
	if c <= 1 {
		delete(k.n, job.Key)
	} else {
		k.n[job.Key] = c - 1
	}
	return c >= k.max
}

// nextReady is when the lane's next job that may start is ready: under a
// cap, among the jobs whose key is below it. Requires l.mu.
func (l *lane) nextReady() (time.Time, bool) {
	if l.perKey.max > 0 && l.q.Picker != nil {
		return l.q.Picker.NextReadyIf(l.perKey.may)
	}
	return l.q.NextReady()
}

// take removes the job to start at now: under a cap, the first in the
// queue's order whose key is below it. Requires l.mu.
func (l *lane) take(now time.Time) (*queue.Job, bool) {
	var (
		job *queue.Job
		ok  bool
	)
	if l.perKey.max > 0 && l.q.Picker != nil {
		job, _, ok = l.q.Picker.TakeIf(now, l.perKey.may)
	} else {
		job, _, ok = l.q.Take(now)
	}
	return job, ok
}
