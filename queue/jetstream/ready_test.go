package jetstream

import (
	"fmt"
	"testing"
	"time"

	"github.com/shaperd/shaper/queue"
)

// The lane is told of a fetched job when it arrives, not when the pull
// that brought it ends: a pull for more jobs than the stream holds waits
// at the server for its whole batch (here up to 2 s). Jobs stored one at a
// time into an idle queue, with each kind of pull (a lane's prefetch, the
// larger one under a per-key cap, and every job under fairness), are
// announced well inside that wait.
func TestReadyWhenFetched(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		fair    bool
		keyConc int
	}{
		{"prefetch", false, 0},
		{"key concurrency", false, 1},
		{"fairness", true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, _ := runStore(t)
			q := openQueue(t, st, QueueSettings{Name: "erp", Capacity: 50, Rate: 20, Concurrency: 4, Fairness: c.fair})
			q.Configure(queue.Settings{Capacity: 50, KeyConcurrency: c.keyConc})
			if w := q.fetchWait(); w < 2*time.Second {
				t.Fatalf("fetch wait %s: the test needs a pull that waits 2 s", w)
			}
			ready := make(chan struct{}, 1)
			startQueue(q, func() {
				select {
				case ready <- struct{}{}:
				default:
				}
			})
			defer q.Stop()
			for i := range 3 {
				id := fmt.Sprint("job", i)
				stored := time.Now()
				if _, err := store(q, &queue.Job{ID: id, Key: "k", Payload: []byte(id), Enqueued: stored}); err != nil {
					t.Fatal(err)
				}
				select {
				case <-ready:
				case <-time.After(5 * time.Second):
					t.Fatalf("%s: the lane was not told within 5 s", id)
				}
				if d := time.Since(stored); d > time.Second {
					t.Errorf("%s: the lane was told %s after the job was stored, want well under the pull's 2 s wait", id, d.Round(time.Millisecond))
				}
				job, _, ok := q.Take(time.Now())
				if !ok || job.ID != id {
					t.Fatalf("took %v, %v after the lane was told; want %s", job, ok, id)
				}
				q.Ack(job, time.Now())
			}
		})
	}
}
