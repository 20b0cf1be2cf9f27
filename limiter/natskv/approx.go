package natskv

import (
	"context"
	"sync"
	"time"

	"github.com/shaperd/shaper/limiter"
)

// syncWorkers bounds the concurrent KV round trips of one sync round.
const syncWorkers = 8

// approx answers from local copies of the keys' states and reconciles them
// with the bucket every SyncInterval (see the package doc).
type approx[S any] struct {
	ex     *exact[S]
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	keys    map[string]*local[S] // keys active since the last sync; guarded by mu
	stopped bool                 // after stop, decisions are exact; guarded by mu
}

// local is one key's local copy: the shared state as of the last sync,
// minus what this instance admitted since, and those units (pending), not
// yet charged to the bucket.
type local[S any] struct {
	s       S
	pending int
	active  bool // decided on since the last sync
}

// startApprox starts the sync goroutine, owned by the store's WaitGroup.
func startApprox[S any](ex *exact[S]) *approx[S] {
	ctx, cancel := context.WithCancel(ex.st.ctx)
	ap := &approx[S]{ex: ex, cancel: cancel, done: make(chan struct{}), keys: map[string]*local[S]{}}
	ex.st.wg.Add(1)
	go func() {
		defer ex.st.wg.Done()
		defer close(ap.done)
		ap.run(ctx)
	}()
	return ap
}

func (ap *approx[S]) costErr(now int64, cost int) error { return ap.ex.costErr(now, cost) }

func (ap *approx[S]) allow(ctx context.Context, k string, now int64, cost int) (limiter.Decision, error) {
	ap.mu.Lock()
	e := ap.keys[k]
	if e == nil || ap.stopped {
		if ap.stopped || len(ap.keys) >= ap.ex.st.set.MaxKeys {
			ap.mu.Unlock()
			return ap.ex.allow(ctx, k, now, cost) // too many hot keys: exact for the rest
		}
		ap.mu.Unlock()
		// A key new to this instance starts from the shared state (one
		// read), so an exhausted key stays exhausted here too.
		c, err := ap.ex.load(ctx, k, now)
		if err != nil {
			return limiter.Decision{}, err
		}
		ap.mu.Lock()
		if e = ap.keys[k]; e == nil {
			e = &local[S]{s: c.s}
			ap.keys[k] = e
		}
	}
	d, s2, err := ap.ex.a.decide(e.s, now, cost)
	if err == nil && d.Allowed {
		e.s = s2
		e.pending += cost
	}
	e.active = true
	ap.mu.Unlock()
	return d, err
}

func (ap *approx[S]) sweep(int64) int { return 0 } // sync forgets idle keys

// stop ends the sync goroutine after a last sync, and waits; later
// decisions take the exact path.
func (ap *approx[S]) stop() {
	ap.mu.Lock()
	ap.stopped = true
	ap.mu.Unlock()
	ap.cancel()
	<-ap.done
}

func (ap *approx[S]) run(ctx context.Context) {
	tick := time.NewTicker(ap.ex.st.set.SyncInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			// Charge what was admitted since the last sync, within one
			// timeout, so a stopping instance leaves no debt unpaid.
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), ap.ex.st.set.Timeout)
			ap.sync(last, time.Now().UnixNano())
			cancel()
			return
		case t := <-tick.C:
			ap.sync(ctx, t.UnixNano())
		}
	}
}

// item is one key to reconcile: its KV key and the units to charge.
type item struct {
	k string
	p int
}

// sync reconciles every key decided on since the last sync and forgets the
// others (their next decision reads the bucket again).
func (ap *approx[S]) sync(ctx context.Context, now int64) {
	ap.mu.Lock()
	items := make([]item, 0, len(ap.keys))
	for k, e := range ap.keys {
		if !e.active && e.pending == 0 {
			delete(ap.keys, k)
			continue
		}
		items = append(items, item{k, e.pending})
		e.pending, e.active = 0, false
	}
	ap.mu.Unlock()
	if len(items) == 0 {
		return
	}
	work := make(chan item)
	var wg sync.WaitGroup
	for range min(syncWorkers, len(items)) {
		wg.Go(func() {
			for it := range work {
				ap.reconcile(ctx, it, now)
			}
		})
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
}

// reconcile charges it.p units to the shared state of it.k and makes the
// merged state, minus what was admitted locally meanwhile, the local copy.
func (ap *approx[S]) reconcile(ctx context.Context, it item, now int64) {
	ex := ap.ex
	ctx, cancel := context.WithTimeout(ctx, ex.st.set.Timeout)
	defer cancel()
	var buf [32]byte
	merged, err := func() (S, error) {
		for try := range ex.st.set.MaxTries {
			c, err := ex.load(ctx, it.k, now)
			if err != nil || it.p == 0 {
				return c.s, err
			}
			g := ex.a.charge(c.s, now, it.p)
			_, conflict, err := ex.st.write(ctx, it.k, c.rev, ex.a.enc(buf[:0], g), ttlFor(now, ex.a.freshAt(g, now)))
			if err != nil || !conflict {
				return g, err
			}
			ex.st.set.Metrics.conflict(ex.name)
			if err := backoff(ctx, try); err != nil {
				return g, err
			}
		}
		var zero S
		return zero, errConflicts
	}()
	ap.mu.Lock()
	defer ap.mu.Unlock()
	e := ap.keys[it.k]
	if err != nil {
		ex.st.set.Metrics.storeError(ex.name)
		ex.st.warn("admission store sync failed; deciding from the local copy", ex.name, err)
		if e != nil {
			e.pending += it.p // charge it next time
		}
		return
	}
	if e != nil {
		e.s = ex.a.charge(merged, now, e.pending)
	}
}
