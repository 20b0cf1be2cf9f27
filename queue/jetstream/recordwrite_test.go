package jetstream

import (
	"context"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/queue"
)

// recordsDown takes the records stream off its subjects, so that every
// record write fails (no stream answers, as while its leader is being
// elected or its node restarts), and returns the function that puts it
// back.
func recordsDown(t *testing.T, st *Store, js natsjs.JetStream) (up func()) {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, st.recordStream())
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	off := cfg
	off.Subjects = []string{"test.records.off"}
	if _, err := js.UpdateStream(ctx, off); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
}

// storeJobs stores jobs id-1 … id-n (job ids j-1 … j-n), each with its
// Nats-Msg-Id.
func storeJobs(t *testing.T, q *Queue, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		id := "order-" + string(rune('0'+i))
		if _, err := store(q, &queue.Job{ID: "j-" + id, DedupeID: id, Payload: []byte(id), Enqueued: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
}

// takeWithin takes the next job, waiting up to d for one to be fetched.
func takeWithin(q *Queue, d time.Duration) *queue.Job {
	for deadline := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		if job, _, ok := q.Take(time.Now()); ok {
			return job
		}
		if time.Now().After(deadline) {
			return nil
		}
	}
}

// streamState returns the queue stream's message count and its consumer's
// acks pending and redeliveries.
func streamState(t *testing.T, st *Store, js natsjs.JetStream, name string) (msgs uint64, pending, redelivered int) {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, st.StreamName(name))
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := js.Consumer(ctx, st.WindowStream(), st.ConsumerName(name))
	if err != nil {
		t.Fatal(err)
	}
	ci, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs, ci.NumAckPending, ci.NumRedelivered
}

// A delivered job with a Nats-Msg-Id is acked only once its dedupe record
// is stored: while the record cannot be written the job stays in its
// stream, kept alive past the ack wait (never redelivered), and it is
// acked as soon as the record is stored.
func TestAckWaitsForRecord(t *testing.T) {
	t.Parallel()
	const ackWait = time.Second
	st, js := runStoreWith(t, Settings{AckWait: ackWait})
	ls := QueueSettings{Name: "printer", Capacity: 10, Rate: 1}
	q := openQueue(t, st, ls)
	storeJobs(t, q, 1)
	up := recordsDown(t, st, js)
	startQueue(q, func() {})
	defer q.Stop()
	job := takeWithin(q, 5*time.Second)
	if job == nil {
		t.Fatal("the stored job was not fetched")
	}
	q.Ack(job, time.Time{})
	time.Sleep(3 * ackWait)
	msgs, pending, redelivered := streamState(t, st, js, "printer")
	if msgs != 1 || pending != 1 || redelivered != 0 {
		t.Fatalf("%s after the ack with its record unwritable: stream has %d messages, consumer %d ack pending, %d redelivered; want 1, 1, 0",
			3*ackWait, msgs, pending, redelivered)
	}
	up()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if msgs, _, _ = streamState(t, st, js, "printer"); msgs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job was not acked within 10 s of its record becoming writable")
		}
	}
	raw, err := js.Stream(context.Background(), st.recordStream())
	if err != nil {
		t.Fatal(err)
	}
	rec, err := raw.GetLastMsgForSubject(context.Background(), st.recordSubject("order-1"))
	if err != nil || string(rec.Data) != job.ID {
		t.Fatalf("record of order-1: %v %v, want job id %s", rec, err, job.ID)
	}
}

// Close waits a bounded time for outstanding record writes and leaves a
// job whose record was not stored in its stream, not acked: it is
// delivered again rather than lost with its record.
func TestCloseLeavesUnrecordedJobQueued(t *testing.T) {
	t.Parallel()
	st, js := runStore(t)
	ls := QueueSettings{Name: "printer", Capacity: 10, Rate: 1}
	q := openQueue(t, st, ls)
	storeJobs(t, q, 1)
	up := recordsDown(t, st, js)
	startQueue(q, func() {})
	job := takeWithin(q, 5*time.Second)
	if job == nil {
		t.Fatal("the stored job was not fetched")
	}
	q.Ack(job, time.Time{})
	t0 := time.Now()
	q.Stop()
	took := time.Since(t0)
	t.Logf("Close returned after %s with one record write outstanding", took.Round(time.Millisecond))
	if took > closeRecordWait+time.Second {
		t.Errorf("Close took %s, want at most %s", took, closeRecordWait+time.Second)
	}
	if msgs, _, _ := streamState(t, st, js, "printer"); msgs != 1 {
		t.Fatalf("after Close the stream holds %d messages, want 1: the unrecorded job was acked", msgs)
	}
	up()
	q2, _ := st.Queue(ls)
	startQueue(q2, func() {})
	defer q2.Stop()
	again := takeWithin(q2, 10*time.Second)
	if again == nil || again.ID != job.ID {
		t.Fatalf("next drainer took %v, want job %s again", again, job.ID)
	}
}

// Jobs waiting for their record hold their place in the prefetch: while
// records cannot be written the queue does not fetch past its prefetch,
// so what a crash would deliver again stays bounded.
func TestUnrecordedJobsHoldPrefetch(t *testing.T) {
	t.Parallel()
	st, js := runStore(t)
	ls := QueueSettings{Name: "printer", Capacity: 10, Rate: 1, Concurrency: 1} // prefetch 1
	q := openQueue(t, st, ls)
	storeJobs(t, q, 3)
	up := recordsDown(t, st, js)
	startQueue(q, func() {})
	defer q.Stop()
	first := takeWithin(q, 5*time.Second)
	if first == nil {
		t.Fatal("the first job was not fetched")
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, ok := q.NextReady(); ok { // the second fetched into the free place
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second job was not fetched")
		}
	}
	q.Ack(first, time.Time{})
	if second := takeWithin(q, time.Second); second == nil {
		t.Fatal("the fetched second job was not handed out")
	}
	if third := takeWithin(q, 1500*time.Millisecond); third != nil {
		t.Fatalf("job %s was fetched while the first job's record was unwritten (prefetch 1)", third.ID)
	}
	up()
	if third := takeWithin(q, 10*time.Second); third == nil {
		t.Fatal("the third job was not fetched within 10 s of the record being written")
	}
}

// A job another instance delivered and deleted first is gone: deleting it
// again is not a failure, or its writer would retry it forever and hold
// its place among the leaving jobs. The server answers such a delete
// "no message found" (10057), or "sequence not found" (10043).
func TestDeletingADeletedJobIsGone(t *testing.T) {
	t.Parallel()
	_, js := runStore(t)
	ctx := context.Background()
	s, err := js.CreateStream(ctx, natsjs.StreamConfig{Name: "GONE", Subjects: []string{"gone.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := js.Publish(ctx, "gone.job", []byte("job")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteMsg(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{1, 9} { // deleted, never stored
		err := s.DeleteMsg(ctx, seq)
		if err == nil || !gone(err) {
			t.Errorf("deleting message %d again: %v; want an error gone() knows", seq, err)
		}
	}
	if err := s.DeleteMsg(ctx, 2); err != nil || gone(nil) {
		t.Fatalf("deleting a stored message: %v", err)
	}
}
