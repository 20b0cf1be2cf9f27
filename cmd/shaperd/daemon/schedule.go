package daemon

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/shaperd/shaper/shaper/producer"
	"github.com/shaperd/shaper/shaper/settings"
)

const (
	hdrPriority  = producer.HeaderPriority
	hdrDelay     = producer.HeaderDelay
	hdrNotBefore = producer.HeaderNotBefore
)

// scheduleHeaders is what Shaper-Priority, Shaper-Delay and
// Shaper-Not-Before ask of a job, as queue.Job carries it.
type scheduleHeaders struct {
	priority  int       // Shaper-Priority + 1; 0 = none (queue.Job.Priority)
	notBefore time.Time // zero = not delayed
}

// parseSchedule parses a job's priority and delay headers at now. The
// priority is checked here against the most levels any downstream may
// have (settings.MaxPriorities), and against the downstream's own
// queue.priorities by its lane; likewise the delay against
// queue.max_delay. Shaper-Delay is a Go duration ≥ 0; Shaper-Not-Before
// an RFC 3339 time (fractions of a second kept), one in the past meaning
// no delay; both at once is an error.
func parseSchedule(now time.Time, hdr http.Header) (scheduleHeaders, error) {
	var s scheduleHeaders
	p, err := headerValue(hdr, hdrPriority, 64)
	if err != nil {
		return s, err
	}
	if p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n >= settings.MaxPriorities {
			return s, fmt.Errorf("header %s %q is not valid: write a whole number 0..queue.priorities−1 "+
				"(0 is the most urgent; at most %d)", hdrPriority, truncate(p, 32), settings.MaxPriorities-1)
		}
		s.priority = n + 1
	}
	delay, err := headerValue(hdr, hdrDelay, 64)
	if err != nil {
		return s, err
	}
	at, err := headerValue(hdr, hdrNotBefore, 64)
	switch {
	case err != nil:
		return s, err
	case delay != "" && at != "":
		return s, errBothDelays
	case delay != "":
		d, err := time.ParseDuration(delay)
		if err != nil || d < 0 {
			return s, fmt.Errorf("header %s %q is not valid: write a Go duration of 0 or more, e.g. 30s or 2h",
				hdrDelay, truncate(delay, 32))
		}
		if d > 0 {
			s.notBefore = now.Add(d)
		}
	case at != "":
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			return s, fmt.Errorf("header %s %q is not valid: write an RFC 3339 time, e.g. 2030-01-02T15:04:05.5Z",
				hdrNotBefore, truncate(at, 40))
		}
		if t.After(now) {
			s.notBefore = t
		}
	}
	return s, nil
}
