package natskv

import (
	"context"
	"hash/maphash"
	"time"
)

// Refund gives key back cost units that AllowAt admitted at now, for a
// request that was not served after all (a caller whose own store failed
// after admission), with limiter's pure refunds (limiter.Keyed.Refund
// describes them per rule): read, refund, compare-and-swap, like a
// decision. In approximate mode the units not yet synced are given back
// locally and the rest to the bucket. It blocks for the KV round trips,
// at most Settings.Timeout. A refund is best effort: a store failure is
// counted and logged like a decision's, and the charge is kept. A key
// absent from the bucket has nothing to give back. The refunding instance
// sees the refund at once; another instance that cached a rejection of
// the key sees it when it next reads the key (a rejection from a stale
// state errs toward admitting less).
func (l *Limiter) Refund(key string, now time.Time, cost int) {
	if cost < 1 {
		return
	}
	ctx, cancel := context.WithTimeout(l.st.ctx, l.st.set.Timeout)
	defer cancel()
	if err := l.eng.refund(ctx, subject(l.name, key), now.UnixNano(), min(cost, l.max)); err != nil {
		l.st.set.Metrics.storeError(l.name)
		l.st.warn("admission store unavailable; a refund was not given back", l.name, err)
	}
}

// refund gives KV key k back cost units charged at now.
func (e *exact[S]) refund(ctx context.Context, k string, now int64, cost int) error {
	lk := &e.locks[maphash.String(e.seed, k)%uint64(len(e.locks))]
	lk.Lock()
	defer lk.Unlock()
	var buf [32]byte
	c, ok := e.get(k)
	for try := range e.st.set.MaxTries {
		if !ok {
			var err error
			if c, err = e.load(ctx, k, now); err != nil {
				e.del(k)
				return err
			}
			if c.rev == 0 {
				return nil // never charged, or forgotten: nothing to give back
			}
		}
		s2 := e.a.refund(c.s, now, cost)
		rev, conflict, err := e.st.write(ctx, k, c.rev, e.a.enc(buf[:0], s2), ttlFor(now, e.a.freshAt(s2, now)))
		switch {
		case err != nil:
			e.del(k)
			return err
		case !conflict:
			e.put(k, cached[S]{s: s2, rev: rev})
			return nil
		}
		e.st.set.Metrics.conflict(e.name)
		ok = false
		if err := backoff(ctx, try); err != nil {
			break
		}
	}
	e.del(k)
	return errConflicts
}

// refund gives back locally what has not been charged to the bucket yet,
// and the rest (already synced) to the bucket.
func (ap *approx[S]) refund(ctx context.Context, k string, now int64, cost int) error {
	ap.mu.Lock()
	if e := ap.keys[k]; e != nil && !ap.stopped {
		local := min(e.pending, cost)
		e.s = ap.ex.a.refund(e.s, now, cost)
		e.pending -= local
		cost -= local
	}
	ap.mu.Unlock()
	if cost == 0 {
		return nil
	}
	return ap.ex.refund(ctx, k, now, cost)
}
