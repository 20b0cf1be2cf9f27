package jetstream

import (
	"context"
	"errors"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
)

// fetch is the fetcher goroutine: it keeps the window's tokens in the
// local index, pulling from the pinned consumer of the window. It pulls at
// least every PinnedTTL/2 so that this instance stays pinned while it
// drains; when the index is full it sends a pull that cannot be served
// (max bytes 1) only to keep the pin. Jobs held waiting for their instant
// (within the lead) take no room: a delayed job never holds up a ready
// one. A retry whose backoff ended makes room for itself, so that it is
// fetched, and starts, ahead of the newer jobs held.
func (q *Queue) fetch() {
	wait := q.fetchWait()
	for q.ctx.Err() == nil {
		q.mu.Lock()
		c := q.c
		// a job waiting for its record holds its place; a retry whose
		// backoff ended makes room for itself (retryWaitsLocked)
		// the window holds a window's worth per level at most (roomFor)
		room := q.windowLocked()*q.hold.index.levels - (q.hold.index.len() - q.hold.index.delayedAt(time.Now())) - len(q.hold.unrecorded) + q.hold.retriesDue
		q.mu.Unlock()
		if c == nil {
			q.sleep(retryEvery)
			continue
		}
		if room <= 0 {
			if !q.sleep(wait) {
				q.keepPin(c, wait)
			}
			continue
		}
		if err := q.pull(c, room, wait); err != nil && q.ctx.Err() == nil {
			q.st.log.Debug("jetstream fetch failed; retrying", "stream", q.stream, "error", err.Error())
			q.sleep(250 * time.Millisecond)
		}
	}
}

// fetchWait is the longest a pull of the fetcher waits at the server.
func (q *Queue) fetchWait() time.Duration { return min(q.st.set.PinnedTTL/2, 2*time.Second) }

// handBackDelay is how long a job handed back at a graceful stop waits in
// the stream before it is delivered again: past the expiry of the stopped
// fetcher's last pull. Delivered at once, it could go to that pull, whose
// subscription the stop is closing: lost there, it would come back only
// after AckWait, one delivery more, counted as a try. The next drainer
// waits PinnedTTL (longer) for the pin anyway.
func (q *Queue) handBackDelay() time.Duration { return q.fetchWait() + 250*time.Millisecond }

// pull fetches up to n messages, waiting at most wait, and tells the lane
// of each job as it arrives: a pull waits at the server until its whole
// batch came or it expired, and a job must not wait for that.
func (q *Queue) pull(c natsjs.Consumer, n int, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(q.ctx, wait)
	defer cancel()
	batch, err := c.Fetch(n, natsjs.FetchContext(ctx), natsjs.FetchPriorityGroup(Group))
	if err != nil {
		return err
	}
	for m := range batch.Messages() {
		if q.admit(m) && q.ready != nil {
			q.ready()
		}
	}
	if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) &&
		!errors.Is(err, natsjs.ErrNoMessages) {
		return err
	}
	return nil
}

// keepPin renews this instance's pin without taking a message.
func (q *Queue) keepPin(c natsjs.Consumer, wait time.Duration) {
	ctx, cancel := context.WithTimeout(q.ctx, min(wait, 200*time.Millisecond))
	defer cancel()
	batch, err := c.FetchBytes(1, natsjs.FetchContext(ctx), natsjs.FetchPriorityGroup(Group))
	if err != nil {
		return
	}
	for m := range batch.Messages() { // cannot fit in 1 byte; held if it ever does
		if q.admit(m) && q.ready != nil {
			q.ready()
		}
	}
}

// sleep waits d, or less when woken; it reports whether it was woken.
func (q *Queue) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-q.ctx.Done():
		return true
	case <-q.wake:
		return true
	case <-t.C:
		return false
	}
}

// maintain is the maintenance goroutine: it ensures the stream and
// consumer (retrying while NATS is unreachable), applies capacity changes
// and refreshes the depth. Each request waits at most RequestTimeout.
func (q *Queue) maintain() {
	tick := time.NewTicker(refreshEvery)
	defer tick.Stop()
	var lastLog time.Time
	for {
		q.mu.Lock()
		s, capDirty, b := q.s, q.capDirty, q.bounds
		q.capDirty = false
		q.mu.Unlock()
		switch {
		case s == nil || capDirty:
			q.ensure(q.ctx, b, &lastLog)
		default:
			q.refresh(q.ctx, s)
		}
		rctx, cancel := context.WithTimeout(q.ctx, 5*RequestTimeout)
		_ = q.st.startRecords(rctx) // once: start-up ensures it unless NATS was down
		cancel()
		select {
		case <-q.ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (q *Queue) ensure(ctx context.Context, b bounds, lastLog *time.Time) {
	q.mu.Lock()
	q.cnt.depth.begin() // the stream's info comes with the answer
	q.mu.Unlock()
	s, c, err := q.st.ensure(ctx, q.name, b)
	q.mu.Lock()
	defer q.mu.Unlock()
	if err != nil {
		q.cnt.depth.abort()
		q.capDirty = q.s != nil // retry a failed capacity update
		if errors.Is(err, ErrIncompatible) {
			q.broken = err
		}
		if q.ctx.Err() == nil && time.Since(*lastLog) > 30*time.Second {
			*lastLog = time.Now()
			q.st.log.Error("jetstream queue not ready; retrying", "downstream", q.name, "stream", q.stream, "error", err.Error())
		}
		return
	}
	q.s, q.c, q.broken = s, c, nil
	if info := s.CachedInfo(); info != nil {
		q.cnt.depth.end(info.State.Msgs, info.State.LastSeq)
	} else {
		q.cnt.depth.abort()
	}
	q.signal()
}

// refresh reads the stream's count and each subject's (depthBook orders
// them with the stores and acks booked meanwhile; the promoter's sources
// take the subjects'), and who is pinned on the window's consumer.
func (q *Queue) refresh(ctx context.Context, s natsjs.Stream) {
	began := time.Now()
	q.mu.Lock()
	q.cnt.depth.begin()
	levels := len(q.cnt.levels)
	for i := range q.cnt.levels {
		q.cnt.levels[i].begin()
	}
	c := q.c
	q.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	info, err := s.Info(rctx, natsjs.WithSubjectFilter(">"))
	cancel()
	var ci *natsjs.ConsumerInfo
	var delayed []int
	if c != nil {
		rctx, cancel := context.WithTimeout(ctx, RequestTimeout)
		ci, _ = c.Info(rctx)
		cancel()
		delayed = q.readDelayed(ctx)
	}
	q.mu.Lock()
	changed := false
	if err != nil {
		q.cnt.depth.abort()
		for i := range q.cnt.levels {
			q.cnt.levels[i].abort()
		}
	} else {
		changed = q.cnt.depth.end(info.State.Msgs, info.State.LastSeq)
		q.endLevelsLocked(levels, info)
		q.pro.srcs.refreshed(q.subject, info.State.Subjects, info.State.LastSeq)
	}
	if delayed != nil {
		q.cnt.delayed = delayed
	}
	if ci != nil {
		q.pro.pinNow = ""
		for _, g := range ci.PriorityGroups {
			if g.Group == Group {
				q.pro.pinNow = g.PinnedClientID
			}
		}
		q.pro.windowEmpty = ci.NumPending == 0 && ci.NumAckPending == 0
		q.pro.watchDelivered(ci.Delivered.Stream, q.cnt.depth.n > 0, time.Now(), q.st.set.PinnedTTL+q.st.set.AckWait)
		if q.pro.windowEmpty && q.idleLocked() {
			q.pro.srcs.reset() // no token anywhere: every job in the stream is to promote
			q.pro.buffered = 0
		}
		if q.pro.pinSeen != "" && q.pro.pinNow != "" && q.pro.pinNow != q.pro.pinSeen {
			q.lostPinLocked()
		}
		if q.liftLocked(began) { // the held jobs left, or the pin is this instance's
			changed = true
		}
	}
	q.expirePromotedLocked(time.Now())
	q.mu.Unlock()
	q.nudge()
	if changed && q.ready != nil {
		q.ready()
	}
}

// readDelayed reads the delayed jobs by level: their tokens in the
// window, by subject. Nil: not read.
func (q *Queue) readDelayed(ctx context.Context) []int {
	q.st.mu.Lock()
	w := q.st.window
	q.st.mu.Unlock()
	if w == nil {
		return nil
	}
	base := q.st.windowSubject(q.name)
	rctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	info, err := w.Info(rctx, natsjs.WithSubjectFilter(base+".*"))
	if err != nil {
		return nil
	}
	out := []int{}
	for subj, n := range info.State.Subjects {
		if l, ok := delayedLevel(base, subj); ok {
			for len(out) <= l {
				out = append(out, 0)
			}
			out[l] += int(n)
		}
	}
	return out
}

// lostPinLocked hands back the jobs held and not started, and forgets
// the promoted ones, when another instance is pinned: this one froze or
// was cut off past PinnedTTL (and AckWait), its tokens went to the next
// drainer, and starting what it still holds would overlap that drainer's
// starts (twice the rate for up to a window). Requires q.mu.
func (q *Queue) lostPinLocked() {
	held := q.hold.index.release()
	if len(held) > 0 {
		q.st.log.Warn("jetstream drain: another instance is pinned; the jobs held here are handed back",
			"downstream", q.name, "jobs", len(held))
	}
	q.handBackLocked(held)
	clear(q.pro.promoted)
	q.pro.pinSeen = ""
}

// idleLocked reports whether this instance holds no job of the window.
// Requires q.mu.
func (q *Queue) idleLocked() bool {
	return len(q.pro.promoted) == 0 && q.hold.index.len() == 0 && len(q.hold.taken) == 0 && q.hold.acks.len() == 0 && len(q.hold.unrecorded) == 0
}

// endLevelsLocked ends the levels' refresh begun for levels levels with
// info: each level's subject's count, the least urgent level's the rest
// of the stream. Requires q.mu.
func (q *Queue) endLevelsLocked(levels int, info *natsjs.StreamInfo) {
	if len(q.cnt.levels) != levels || levels < 2 { // reconfigured meanwhile: the next refresh counts
		for i := range q.cnt.levels {
			q.cnt.levels[i].abort()
		}
		return
	}
	counts := make([]uint64, levels)
	rest := info.State.Msgs
	for subj, n := range info.State.Subjects {
		if l := levelOfSubject(q.subject, subj, levels); l < levels-1 {
			counts[l] += n
			rest -= min(n, rest)
		}
	}
	counts[levels-1] = rest
	for i := range q.cnt.levels {
		q.cnt.levels[i].end(counts[i], info.State.LastSeq)
	}
}

// keepAliveEvery is how often a queue's held messages get a progress ack:
// five chances per ack wait, so that a few late or lost ones (a GC pause,
// a busy machine, a short NATS stall) never let the server hand a live
// instance's job to another.
func keepAliveEvery(ackWait time.Duration) time.Duration {
	return max(ackWait/5, 100*time.Millisecond)
}

// keepAlive is the keep-alive goroutine, one per queue for all of the jobs
// it holds: every keepAliveEvery it tells the server each of them is still
// being worked on, so AckWait only matters for an instance that died or
// froze. Its beat (every beatEvery, when that is sooner) is how the queue
// sees that it did not run for a while (thaw.go). It runs apart from
// maintain, whose requests may wait on a slow server, so that the
// progress acks are never late for that.
func (q *Queue) keepAlive() {
	acks := keepAliveEvery(q.st.set.AckWait)
	every := min(acks, beatEvery(q.st.set.PinnedTTL)) // the beat that sees a gap (thaw.go)
	tick := time.NewTicker(every)
	defer tick.Stop()
	acked := time.Now()
	q.mu.Lock()
	q.thaw.every, q.thaw.beat = every, acked
	q.mu.Unlock()
	for {
		select {
		case <-q.ctx.Done():
			return
		case <-tick.C:
			now := time.Now()
			q.mu.Lock()
			q.beatLocked(now)
			q.mu.Unlock()
			if now.Sub(acked) >= acks-every/2 {
				acked = now
				q.inProgress()
			}
		}
	}
}

// inProgress sends a progress ack for every held message. The acks are
// published without waiting for an answer.
func (q *Queue) inProgress() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range q.hold.index.msgs {
		_ = m.InProgress()
	}
	for _, m := range q.hold.taken {
		_ = m.InProgress()
	}
	for m := range q.hold.acks.at {
		_ = m.InProgress()
	}
	for m := range q.hold.unrecorded {
		_ = m.InProgress()
	}
}
