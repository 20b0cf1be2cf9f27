package queue

import "time"

// entry is a held job and the time it becomes ready to start.
type entry struct {
	job *Job
	at  time.Time
}

// retryList holds the jobs waiting out a retry backoff, sorted by the time
// they become ready (equal times in arrival order), so sorted insertion into
// a slice is enough: only jobs whose delivery just failed are in it. Both
// memory kinds keep one; retries go ahead of every fresh job once ready.
type retryList []entry

// add inserts job, ready at at.
func (r *retryList) add(job *Job, at time.Time) {
	l := *r
	i := len(l)
	for i > 0 && l[i-1].at.After(at) {
		i--
	}
	l = append(l, entry{})
	copy(l[i+1:], l[i:])
	l[i] = entry{job, at}
	*r = l
}

// popReady removes and returns the first retry if it is ready at now.
func (r *retryList) popReady(now time.Time) (entry, bool) {
	l := *r
	if len(l) == 0 || l[0].at.After(now) {
		return entry{}, false
	}
	e := l[0]
	l[0] = entry{} // let the job be collected
	*r = l[1:]
	return e, true
}

// popReadyIf removes and returns the first retry ready at now whose key
// may start (may nil: any).
func (r *retryList) popReadyIf(now time.Time, may func(string) bool) (entry, bool) {
	l := *r
	for i := 0; i < len(l) && !l[i].at.After(now); i++ {
		if may == nil || may(l[i].job.Key) {
			e := l[i]
			copy(l[i:], l[i+1:])
			l[len(l)-1] = entry{} // let the job be collected
			*r = l[:len(l)-1]
			return e, true
		}
	}
	return entry{}, false
}

// firstIf is the first retry whose key may start (may nil: the first).
func (r retryList) firstIf(may func(string) bool) (entry, bool) {
	for _, e := range r {
		if may == nil || may(e.job.Key) {
			return e, true
		}
	}
	return entry{}, false
}

// before returns when the next job is ready: the first retry's time if it
// comes before a fresh job ready at fresh (or there is none, ok false).
func (r retryList) before(fresh time.Time, ok bool) (time.Time, bool) {
	if len(r) > 0 && (!ok || r[0].at.Before(fresh)) {
		return r[0].at, true
	}
	return fresh, ok
}

// cost is the sum of the retries' costs.
func (r retryList) cost() int {
	n := 0
	for _, e := range r {
		n += JobCost(e.job)
	}
	return n
}

// jobs appends the retries' jobs to out.
func (r retryList) jobs(out []*Job) []*Job {
	for _, e := range r {
		out = append(out, e.job)
	}
	return out
}
