package policy

import "github.com/shaperd/shaper/queue"

// KeyFlight is per-key concurrency (queue.key_concurrency): the tries in
// flight per admission key, so that the lane's drain passes over the jobs
// of a key at its cap (queue.Picker) while other keys' jobs start. Only
// keys with a try in flight are held, so it is bounded by the lane's
// concurrency. With no cap it counts nothing and the lane drains in plain
// order. Its zero value has no cap; like the policies, it is used under
// the lane's lock.
type KeyFlight struct {
	max int            // the cap; 0 = none
	n   map[string]int // key → tries in flight, while max > 0
	may func(key string) bool
}

// Max is the cap; 0 = none.
func (k *KeyFlight) Max() int { return k.max }

// SetMax applies a new cap. Tries started while there was none are not
// counted: the cap holds from the next starts on.
func (k *KeyFlight) SetMax(n int) {
	k.max = n
	if n == 0 {
		k.n = nil
	} else if k.n == nil {
		k.n = map[string]int{}
	}
}

// MayStart reports whether a job of key may start: its key has fewer than
// the cap's tries in flight.
func (k *KeyFlight) MayStart(key string) bool { return k.n[key] < k.max }

// May is MayStart as a func value, made once (a method value per take
// would allocate).
func (k *KeyFlight) May() func(key string) bool {
	if k.may == nil {
		k.may = k.MayStart
	}
	return k.may
}

// Started counts job's try in flight.
func (k *KeyFlight) Started(job *queue.Job) {
	if k.max > 0 {
		k.n[job.Key]++
	}
}

// Finished counts job's try done and reports whether its key was at the
// cap (a job of the key may have waited: the lane's schedule restarts).
func (k *KeyFlight) Finished(job *queue.Job) (wasAtCap bool) {
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
