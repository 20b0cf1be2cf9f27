package jetstream

import (
	"testing"
	"time"

	"github.com/shaperd/shaper/queue"
)

// A job's cost is stored with it: taken from the stream, a cost-3 job
// still holds the lane for three intervals (it came back as cost 1).
func TestCostStoredWithJob(t *testing.T) {
	t.Parallel()
	st, _ := runStore(t)
	ls := QueueSettings{Name: "printer", Capacity: 10, Rate: 100, Concurrency: 1}
	q := openQueue(t, st, ls)
	for _, j := range []*queue.Job{
		{ID: "heavy", Cost: 3, Payload: []byte("h"), Enqueued: time.Now()},
		{ID: "light", Payload: []byte("l"), Enqueued: time.Now()},
	} {
		if _, err := store(q, j); err != nil {
			t.Fatal(err)
		}
	}
	startQueue(q, func() {})
	defer q.Stop()
	for _, want := range []struct {
		id   string
		cost int
	}{{"heavy", 3}, {"light", 1}} {
		j := takeWithin(q, 5*time.Second)
		if j == nil || j.ID != want.id {
			t.Fatalf("took %v within 5 s, want job %s", j, want.id)
		}
		if got := queue.JobCost(j); got != want.cost {
			t.Errorf("job %s taken with cost %d, want %d", j.ID, got, want.cost)
		}
		if j.Header.Get("Shaper-Cost") != "" {
			t.Errorf("job %s: the stored cost header is passed on to the downstream", j.ID)
		}
	}
}
