package deadletter

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/metrics"
)

// Bounds of the rejected publishes' dead letters.
const (
	rejectedBacklog = 4096            // dead letters waiting for the store; past it one is dropped
	rejectedBytes   = 4 << 20         // and their payloads' bytes
	rejectedTimeout = 5 * time.Second // one store
	rejectedLogGap  = 10 * time.Second
)

// Rejected stores the dead letters of rejected plain publishes (no
// reply subject: nobody was told) from one goroutine, so intake never waits
// on the store. Create it with NewRejected and start it; Add is safe for concurrent
// use. Such a job was never accepted, so one the store refuses or
// falls behind on (more than rejectedBacklog or rejectedBytes waiting) is
// not retried: it is
// counted in shaper_dead_letters_lost_total and logged. A flood of
// rejections is bounded twice: here, and by the store's own bounds.
type Rejected struct {
	dl   shaper.DeadLetterer
	jobs *metrics.Metrics
	log  *slog.Logger
	ch   chan shaper.DeadLetter

	stopped atomic.Bool
	bytes   atomic.Int64 // payload bytes waiting
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	lastLog time.Time
}

// NewRejected prepares the worker; Start starts it.
func NewRejected(dl shaper.DeadLetterer, jobs *metrics.Metrics, log *slog.Logger) *Rejected {
	return &Rejected{dl: dl, jobs: jobs, log: log, ch: make(chan shaper.DeadLetter, rejectedBacklog)}
}

// Start starts the worker's goroutine.
func (r *Rejected) Start(ctx context.Context) error {
	ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	r.wg.Go(func() { r.run(ctx) })
	return nil
}

// Stop stores what is waiting, each within rejectedTimeout, and returns
// once the worker has. Idempotent.
func (r *Rejected) Stop() error {
	r.stopped.Store(true)
	if r.cancel != nil {
		r.cancel()
	}
	r.wg.Wait()
	return nil
}

// Add queues one dead letter; it never blocks. The payload is copied: the
// message's buffer also holds its headers, which need not wait too.
func (r *Rejected) Add(dl shaper.DeadLetter) {
	if r.stopped.Load() {
		r.lost(dl, "the daemon is stopping", nil)
		return
	}
	n := int64(len(dl.Job.Payload))
	if r.bytes.Add(n) > rejectedBytes {
		r.bytes.Add(-n)
		r.lost(dl, "the dead-letter store fell behind", nil)
		return
	}
	job := *dl.Job
	job.Payload = bytes.Clone(job.Payload)
	dl.Job = &job
	select {
	case r.ch <- dl:
	default:
		r.bytes.Add(-n)
		r.lost(dl, "the dead-letter store fell behind", nil)
	}
}

// run stores until ctx is done, then what is waiting, all of it within
// one more rejectedTimeout (past that each is counted lost).
func (r *Rejected) run(ctx context.Context) {
	for {
		select {
		case dl := <-r.ch:
			r.store(context.Background(), dl)
		case <-ctx.Done():
			last, cancel := context.WithTimeout(context.Background(), rejectedTimeout)
			defer cancel()
			for {
				select {
				case dl := <-r.ch:
					r.store(last, dl)
				default:
					return
				}
			}
		}
	}
}

func (r *Rejected) store(ctx context.Context, dl shaper.DeadLetter) {
	defer r.bytes.Add(-int64(len(dl.Job.Payload)))
	sctx, cancel := context.WithTimeout(ctx, rejectedTimeout)
	defer cancel()
	if _, err := r.dl.DeadLetter(sctx, dl); err != nil {
		r.jobs.DeadLetterStoreError(dl.Job.Downstream)
		r.lost(dl, "the dead-letter store refused it", err)
	}
}

// lost counts a dead letter neither stored nor published, logging at
// most one line per rejectedLogGap at warning level.
func (r *Rejected) lost(dl shaper.DeadLetter, why string, err error) {
	r.jobs.DeadLetterLost(dl.Job.Downstream)
	level := slog.LevelDebug
	r.mu.Lock()
	if now := time.Now(); now.Sub(r.lastLog) >= rejectedLogGap {
		r.lastLog, level = now, slog.LevelWarn
	}
	r.mu.Unlock()
	args := []any{"downstream", dl.Job.Downstream, "reason", string(dl.Reason), "why", why}
	if err != nil {
		args = append(args, "error", err.Error())
	}
	r.log.Log(context.Background(), level, "dead letter of a rejected publish not stored", args...)
}
