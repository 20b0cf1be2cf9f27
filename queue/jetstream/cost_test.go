package jetstream

import (
	"context"
	"testing"
	"time"

	"github.com/shaperd/shaper/queue"
)

// A job's cost is stored with it: taken from the stream, a cost-3 job
// still holds the lane for three intervals (it came back as cost 1).
func TestCostStoredWithJob(t *testing.T) {
	st, _ := runStore(t)
	ls := QueueSettings{Name: "printer", Capacity: 10, Rate: 100, Concurrency: 1}
	if err := st.Ensure(context.Background(), []QueueSettings{ls}); err != nil {
		t.Fatal(err)
	}
	q, err := st.Queue(ls)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []*queue.Job{
		{ID: "heavy", Cost: 3, Payload: []byte("h"), Enqueued: time.Now()},
		{ID: "light", Payload: []byte("l"), Enqueued: time.Now()},
	} {
		done := make(chan error, 1)
		q.enqueue(j, func(_ int, err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	q.Start(func() {})
	defer q.Close()
	want := map[string]int{"heavy": 3, "light": 1}
	deadline := time.Now().Add(5 * time.Second)
	for len(want) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("jobs %v not taken within 5 s", want)
		}
		j, _, ok := q.Take(time.Now())
		if !ok {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if got := queue.JobCost(j); got != want[j.ID] {
			t.Errorf("job %s taken with cost %d, want %d", j.ID, got, want[j.ID])
		}
		if j.Header.Get("Shaper-Cost") != "" {
			t.Errorf("job %s: the stored cost header is passed on to the downstream", j.ID)
		}
		delete(want, j.ID)
	}
}
