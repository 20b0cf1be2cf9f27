package jetstream

import "time"

// thaw fences the starts of an instance that did not run for a while (it
// was frozen, SIGSTOP, or starved). Its pin may have expired meanwhile and
// another instance may be draining the window, with the tokens of the jobs
// held here delivered again once the ack wait passed too: starting those
// at once, before the next refresh tells that the pin is gone, would start
// them twice and give the downstream two drainers' rate. So after such a
// gap no held job starts until a refresh begun after it has read who is
// pinned: this instance, or nobody, lifts the fence; another instance
// hands the held jobs back (lostPinLocked). The gap is seen by the
// keep-alive goroutine's beat, or by a start that finds the beat late.
// Guarded by the queue's mu.
type thaw struct {
	beat  time.Time // the keep-alive goroutine's last beat
	every time.Duration
	since time.Time // the fence went up (zero: none)
}

// stallLocked reports whether q did not run for longer than its pin can
// be trusted across (half of PinnedTTL, past the beat's period): the
// fetcher pulls at least every PinnedTTL/2, so a pin confirmed last
// before the gap may have expired. It puts the fence up when so.
// Requires q.mu.
func (q *Queue) stallLocked(now time.Time) bool {
	if !q.thaw.since.IsZero() {
		return true
	}
	gap := now.Sub(q.thaw.beat)
	if q.thaw.beat.IsZero() || gap <= q.thaw.every+q.st.set.PinnedTTL/2 {
		return false
	}
	q.thaw.since = now
	if q.hold.index.len() > 0 {
		q.st.log.Warn("jetstream drain: this instance did not run for a while (frozen or starved); "+
			"its held jobs wait until it has read whether it is still the pinned drainer",
			"downstream", q.name, "stream", q.stream, "gap", gap.Round(time.Millisecond), "held", q.hold.index.len())
	}
	return true
}

// beatLocked is the keep-alive goroutine's beat at now. Requires q.mu.
func (q *Queue) beatLocked(now time.Time) {
	q.stallLocked(now)
	q.thaw.beat = now
}

// liftLocked lifts the fence after a refresh begun at began read the pin:
// pinned names no other instance (this one's pin, or none). It reports
// whether the fence went down, so that the lane is told of its jobs.
// Requires q.mu.
func (q *Queue) liftLocked(began time.Time) bool {
	if q.thaw.since.IsZero() || began.Before(q.thaw.since) {
		return false
	}
	q.thaw.since = time.Time{}
	return true
}

// beatEvery is the keep-alive goroutine's beat for a pinned TTL: often
// enough that a gap of half the TTL stands out.
func beatEvery(pinnedTTL time.Duration) time.Duration {
	return max(pinnedTTL/4, 100*time.Millisecond)
}
