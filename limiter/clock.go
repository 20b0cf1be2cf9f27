package limiter

import (
	"sync/atomic"
	"time"
)

// clock maps time.Time values to int64 nanoseconds on one timeline: the Unix
// nanoseconds of the first instant it saw (its epoch) plus now.Sub(epoch).
//
// now.Sub uses the monotonic clock readings when both instants carry one, so
// a limiter fed time.Now() values is immune to wall-clock steps after its
// epoch; instants without a monotonic reading (time.Date, parsed times) are
// compared by wall clock, so for them the timeline is exactly UnixNano. Fixed
// windows are aligned on this timeline, that is to the wall clock as it read
// at the epoch. Instants must lie within the years 1678–2262, the range of
// UnixNano. The zero clock is ready to use and safe for concurrent use.
type clock struct {
	p atomic.Pointer[epoch]
}

type epoch struct {
	t    time.Time
	unix int64
	mono bool // t carries a monotonic reading
}

// ns returns now on the clock's timeline.
//
// Without a monotonic reading in the epoch, now.Sub(epoch) is the wall-clock
// difference whatever now is, so the result is exactly now.UnixNano(); that
// is computed directly, because Sub's wall-clock path verifies itself with
// an Add and an Equal, work a decision need not do. With one, Sub takes its
// cheap monotonic path.
func (c *clock) ns(now time.Time) int64 {
	e := c.p.Load()
	if e == nil {
		e = c.init(now)
	}
	if !e.mono {
		return now.UnixNano()
	}
	return e.unix + int64(now.Sub(e.t))
}

// init sets the epoch once; a concurrent first caller may win instead.
func (c *clock) init(now time.Time) *epoch {
	// Round(0) strips the monotonic reading and nothing else.
	e := &epoch{t: now, unix: now.UnixNano(), mono: now != now.Round(0)}
	if c.p.CompareAndSwap(nil, e) {
		return e
	}
	return c.p.Load()
}

// floorDiv returns floor(a/b) for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}
