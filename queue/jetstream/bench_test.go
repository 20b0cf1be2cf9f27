package jetstream

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/shaperd/shaper/queue"
)

// BenchmarkDrain measures the drain side of a jetstream queue: b.N jobs,
// each with a Nats-Msg-Id, are stored first; then the timer runs while
// they are fetched, taken and acked (each ack after its dedupe record was
// written) until the stream is empty. Prefetch 100 (the most a lane
// keeps), one server, file storage, one replica.
//
//	go test ./queue/jetstream -run '^$' -bench BenchmarkDrain -benchtime 5000x -count 6
func BenchmarkDrain(b *testing.B) {
	st, js := runStoreWith(b, Settings{})
	ls := QueueSettings{Name: "printer", Capacity: b.N + 1, Rate: 10000, Concurrency: 1}
	ctx := context.Background()
	if err := st.Ensure(ctx, []QueueSettings{ls}); err != nil {
		b.Fatal(err)
	}
	q, err := st.Queue(ls)
	if err != nil {
		b.Fatal(err)
	}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	errs := make(chan error, b.N)
	for i := range b.N {
		id := run + "-" + strconv.Itoa(i)
		q.enqueue(&queue.Job{ID: "j" + id, DedupeID: id, Payload: []byte("x"), Enqueued: time.Now()},
			func(_ int, err error) { errs <- err })
	}
	for range b.N {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	ready := make(chan struct{}, 1)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	startQueue(q, func() {
		select {
		case ready <- struct{}{}:
		default:
		}
	})
	for taken := 0; taken < b.N; {
		job, _, ok := q.Take(time.Now())
		if !ok {
			select {
			case <-ready:
			case <-time.After(5 * time.Millisecond):
			}
			continue
		}
		q.Ack(job, time.Time{})
		taken++
	}
	s, err := js.Stream(ctx, st.StreamName("printer"))
	if err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		if info, err := s.Info(ctx); err == nil && info.State.Msgs == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the stream was not empty a minute after the last ack")
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	q.Stop()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
}
