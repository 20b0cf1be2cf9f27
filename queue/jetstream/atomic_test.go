package jetstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/queue"
)

// offerAll offers jobs to q as one atomic store and waits for the answer;
// an answer of the wrong shape, or none, or a second one, is an error.
func offerAll(t *testing.T, q *Queue, jobs []*queue.Job) ([]queue.Placed, error) {
	t.Helper()
	type res struct {
		placed []queue.Placed
		err    error
	}
	ch := make(chan res, 2)
	q.OfferAll(jobs, time.Now()).Then(func(p []queue.Placed, err error) { ch <- res{p, err} })
	select {
	case r := <-ch:
		select {
		case <-ch:
			return nil, errors.New("OfferAll answered twice")
		case <-time.After(10 * time.Millisecond):
		}
		if r.err == nil && len(r.placed) != len(jobs) {
			return nil, fmt.Errorf("OfferAll of %d jobs answered %d places", len(jobs), len(r.placed))
		}
		return r.placed, r.err
	case <-time.After(20 * time.Second):
		return nil, errors.New("OfferAll did not answer within 20 s")
	}
}

// jobsNamed are jobs without an ID whose payloads are names.
func jobsNamed(names ...string) []*queue.Job {
	jobs := make([]*queue.Job, len(names))
	for i, n := range names {
		jobs[i] = &queue.Job{Payload: []byte(n), Enqueued: time.Now()}
	}
	return jobs
}

// streamMsgs is the number of messages in downstream's stream.
func streamMsgs(t *testing.T, st *Store, downstream string) uint64 {
	t.Helper()
	s, err := st.js.Stream(context.Background(), st.StreamName(downstream))
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().State.Msgs
}

// runAtomicServer starts a JetStream server with limits on atomic batches
// and returns a Store on it.
func runAtomicServer(t *testing.T, limits server.JSLimitOpts) *Store {
	t.Helper()
	opts := natsserver.DefaultTestOptions
	opts.Port, opts.JetStream, opts.StoreDir = -1, true, t.TempDir()
	opts.JetStreamLimits = limits
	srv := natsserver.RunServer(&opts)
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	st, err := New(nc, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// 100 jobs offered at once are stored in order, named by their places
// (sequences 1..100), at positions 1..100, found by their names, and
// drained in order.
func TestOfferAllStoresInOrder(t *testing.T) {
	t.Parallel()
	st, _ := runStore(t)
	q := openQueue(t, st, QueueSettings{Name: "printer", Capacity: 200, Rate: 1000, Concurrency: 100})
	var names []string
	for i := range 100 {
		names = append(names, fmt.Sprintf("job-%03d", i))
	}
	jobs := jobsNamed(names...)
	placed, err := offerAll(t, q, jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := range jobs {
		epoch, seq, ok := parseName(j.ID)
		if !ok || !j.Named || epoch != q.epochNow() || seq != uint64(i+1) {
			t.Fatalf("job %d: id %q named %v; want %s-%d", i, j.ID, j.Named, q.epochNow(), i+1)
		}
		if p := placed[i]; p.Position != i+1 || p.Ahead != i || p.Duplicate {
			t.Fatalf("job %d placed %+v, want position %d, ahead %d", i, p, i+1, i)
		}
	}
	if got, ok, err := q.Find(context.Background(), jobs[41].ID); !ok || err != nil || string(got.Payload) != "job-041" {
		t.Fatalf("Find(%s): %v, %v, %v", jobs[41].ID, got, ok, err)
	}
	if n := streamMsgs(t, st, "printer"); n != 100 {
		t.Fatalf("stream holds %d jobs, want 100", n)
	}
	startQueue(q, func() {})
	defer q.Stop()
	if got := takeN(t, q, 100); !slices.Equal(got, names) {
		t.Fatalf("drained %v, want %v", got, names)
	}
}

// Jobs of several levels are stored on their levels' subjects, as Offer
// stores them: the drain starts the most urgent level first.
func TestOfferAllLevels(t *testing.T) {
	t.Parallel()
	st, _ := runStore(t)
	q := openQueue(t, st, QueueSettings{Name: "printer", Capacity: 10, Rate: 1000, Concurrency: 10, Priorities: 2})
	jobs := []*queue.Job{job("a", "", 2), job("b", "", 1), job("c", "", 2), job("d", "", 1)}
	if _, err := offerAll(t, q, jobs); err != nil {
		t.Fatal(err)
	}
	startQueue(q, func() {})
	defer q.Stop()
	waitHeld(t, q, 4)
	if got := takeN(t, q, 4); !slices.Equal(got, []string{"b", "d", "a", "c"}) {
		t.Fatalf("drained %v, want [b d a c]", got)
	}
}

// A batch the stream cannot take whole (max_msgs, max_bytes: discard new)
// stores none of its jobs and is answered queue.ErrFull (ErrMaxBytes).
func TestOfferAllFull(t *testing.T) {
	t.Parallel()
	st, _ := runStore(t)
	q := openQueue(t, st, QueueSettings{Name: "printer", Capacity: 10, Rate: 1})
	storeJobs(t, q, 5)
	if _, err := offerAll(t, q, jobsNamed("a", "b", "c", "d", "e", "f")); !errors.Is(err, queue.ErrFull) {
		t.Fatalf("6 jobs into a stream with room for 5: %v, want queue.ErrFull", err)
	}
	if n := streamMsgs(t, st, "printer"); n != 5 {
		t.Fatalf("stream holds %d jobs, want the 5 stored before", n)
	}
	placed, err := offerAll(t, q, jobsNamed("a", "b", "c", "d", "e"))
	if err != nil || placed[4].Position != 10 {
		t.Fatalf("5 jobs into room for 5: %v, %v; want the last at position 10", placed, err)
	}

	q2 := openQueue(t, st, QueueSettings{Name: "scanner", Capacity: 100, Rate: 1, MaxBytes: 2000})
	big := make([]byte, 600)
	jobs := []*queue.Job{{Payload: big}, {Payload: big}, {Payload: big}, {Payload: big}}
	if _, err := offerAll(t, q2, jobs); !errors.Is(err, queue.ErrMaxBytes) {
		t.Fatalf("2400 bytes into max_bytes 2000: %v, want queue.ErrMaxBytes", err)
	}
	if n := streamMsgs(t, st, "scanner"); n != 0 {
		t.Fatalf("stream holds %d jobs, want none", n)
	}
}

// A job whose Nats-Msg-Id the stream holds (its job still queued: no
// record yet), whose record the table holds, or that an earlier job of the
// same call has, is answered as a duplicate with the original's job id,
// and the rest are stored; a later single copy of a batch's id is a
// duplicate of its job.
func TestOfferAllDuplicates(t *testing.T) {
	t.Parallel()
	st, _ := runStore(t)
	q := openQueue(t, st, QueueSettings{Name: "printer", Capacity: 10, Rate: 1})
	queued := &queue.Job{DedupeID: "order-1", Payload: []byte("x"), Enqueued: time.Now()}
	if _, err := store(q, queued); err != nil || !queued.Named {
		t.Fatalf("store: %q, %v", queued.ID, err)
	}
	if err := st.nc.PublishMsg(st.recordMsg("order-9", "j9", time.Now())); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, found, _ := st.table.get(time.Now(), "order-9"); found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the record of order-9 did not reach the table")
		}
	}
	jobs := jobsNamed("a", "b", "c", "d", "e")
	for i, id := range []string{"order-0", "order-1", "", "order-1", "order-9"} {
		jobs[i].DedupeID = id
	}
	placed, err := offerAll(t, q, jobs)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		dup bool
		id  string
		pos int
	}{{false, "", 2}, {true, queued.ID, 0}, {false, "", 3}, {true, queued.ID, 0}, {true, "j9", 0}}
	for i, w := range want {
		p := placed[i]
		if p.Duplicate != w.dup || p.Position != w.pos || w.dup && jobs[i].ID != w.id || !w.dup && !jobs[i].Named {
			t.Errorf("job %s: %+v, id %q; want duplicate %v, id %q, position %d", jobs[i].Payload, p, jobs[i].ID, w.dup, w.id, w.pos)
		}
	}
	if n := streamMsgs(t, st, "printer"); n != 3 {
		t.Fatalf("stream holds %d jobs, want 3", n)
	}
	again := &queue.Job{DedupeID: "order-0", Payload: []byte("a"), Enqueued: time.Now()}
	if _, err := store(q, again); !errors.Is(err, queue.ErrDuplicate) || again.ID != jobs[0].ID {
		t.Fatalf("single copy of a batch's id: %q, %v; want %q, queue.ErrDuplicate", again.ID, err, jobs[0].ID)
	}
	dups := jobsNamed("x", "y")
	dups[0].DedupeID, dups[1].DedupeID = "order-0", "order-1"
	if placed, err := offerAll(t, q, dups); err != nil || !placed[0].Duplicate || !placed[1].Duplicate ||
		dups[0].ID != jobs[0].ID || dups[1].ID != queued.ID {
		t.Fatalf("a batch of duplicates only: %+v, %v, ids %q %q", placed, err, dups[0].ID, dups[1].ID)
	}
}

// More jobs than one atomic batch may hold are refused, none stored: over
// MaxAll at once, and over a server's lower max_batch_size by the server.
func TestOfferAllTooMany(t *testing.T) {
	t.Parallel()
	st := runAtomicServer(t, server.JSLimitOpts{MaxBatchSize: 5})
	q := openQueue(t, st, QueueSettings{Name: "printer", Capacity: 2000, Rate: 1})
	jobs := make([]*queue.Job, MaxAtomic+1)
	for i := range jobs {
		jobs[i] = &queue.Job{Payload: []byte("x")}
	}
	if _, err := offerAll(t, q, jobs); !errors.Is(err, errBatchTooLarge) {
		t.Fatalf("%d jobs: %v, want errBatchTooLarge", len(jobs), err)
	}
	_, err := offerAll(t, q, jobs[:6])
	if !errors.Is(err, errBatchTooLarge) {
		t.Fatalf("6 jobs, max_batch_size 5: %v, want errBatchTooLarge", err)
	}
	t.Log(err)
	if n := streamMsgs(t, st, "printer"); n != 0 {
		t.Fatalf("stream holds %d jobs, want none", n)
	}
	if _, err := offerAll(t, q, jobs[:5]); err != nil {
		t.Fatalf("5 jobs, max_batch_size 5: %v", err)
	}
}

// A previous version's stream, without allow_atomic, gains it; a stream
// without it refuses OfferAll before anything is sent.
func TestEnsureAllowsAtomic(t *testing.T) {
	t.Parallel()
	st, js := runStore(t)
	ctx := context.Background()
	cfg := st.streamConfig("printer", bounds{capacity: 10})
	cfg.AllowAtomicPublish = false
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	q, _ := st.Queue(QueueSettings{Name: "printer", Capacity: 10, Rate: 1})
	if _, err := offerAll(t, q, jobsNamed("a")); !errors.Is(err, errNoAtomic) {
		t.Fatalf("OfferAll into a stream without allow_atomic: %v, want errNoAtomic", err)
	}
	if err := st.Ensure(ctx, []QueueSettings{{Name: "printer", Capacity: 10}}); err != nil {
		t.Fatal(err)
	}
	s, _ := js.Stream(ctx, st.StreamName("printer"))
	if !s.CachedInfo().Config.AllowAtomicPublish {
		t.Fatal("the existing stream did not gain allow_atomic")
	}
	if _, err := offerAll(t, q, jobsNamed("a")); err != nil {
		t.Fatal(err)
	}
}

// A batch whose commit never comes (its publisher died midway) stores
// nothing; the server drops it after its batch timeout, so a late commit
// is refused as incomplete.
func TestBatchWithoutCommitStoresNothing(t *testing.T) {
	t.Parallel()
	st := runAtomicServer(t, server.JSLimitOpts{MaxBatchTimeout: 300 * time.Millisecond})
	q := openQueue(t, st, QueueSettings{Name: "printer", Capacity: 10, Rate: 1})
	msg := func(seq int, commit bool) *nats.Msg {
		m := encode(q.subject, &queue.Job{Payload: []byte("x"), Enqueued: time.Now()})
		m.Header[hdrBatchID] = []string{"crashed"}
		m.Header[hdrBatchSeq] = []string{strconv.Itoa(seq)}
		if commit {
			m.Header[hdrBatchCommit] = []string{"1"}
		}
		return m
	}
	for seq := 1; seq <= 3; seq++ {
		if err := st.nc.PublishMsg(msg(seq, false)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond)
	if n := streamMsgs(t, st, "printer"); n != 0 {
		t.Fatalf("stream holds %d jobs of an uncommitted batch", n)
	}
	reply, err := st.nc.RequestMsg(msg(4, true), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = parsePubAck(reply.Data)
	var apiErr *natsjs.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != errCodeAtomicIncomplete {
		t.Fatalf("late commit: %s, want the incomplete batch error %d", reply.Data, errCodeAtomicIncomplete)
	}
	if n := streamMsgs(t, st, "printer"); n != 0 {
		t.Fatalf("stream holds %d jobs after a late commit", n)
	}
}

// Batches and single stores offered at once each get their own places: a
// batch's jobs take sequences in a row, whatever is stored meanwhile.
func TestOfferAllConcurrent(t *testing.T) {
	t.Parallel()
	st, _ := runStore(t)
	q := openQueue(t, st, QueueSettings{Name: "printer", Capacity: 1000, Rate: 1})
	var wg sync.WaitGroup
	batches := make([][]*queue.Job, 8)
	for b := range batches {
		batches[b] = jobsNamed(slices.Repeat([]string{"x"}, 50)...)
		wg.Go(func() {
			if _, err := offerAll(t, q, batches[b]); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			if _, err := store(q, &queue.Job{Payload: []byte("y")}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for _, jobs := range batches {
		for i, j := range jobs {
			_, seq, ok := parseName(j.ID)
			_, first, _ := parseName(jobs[0].ID)
			if !ok || seq != first+uint64(i) || seen[seq] {
				t.Fatalf("batch job %d: %q, the batch's first %q", i, j.ID, jobs[0].ID)
			}
			seen[seq] = true
		}
	}
	if n := streamMsgs(t, st, "printer"); n != 8*51 {
		t.Fatalf("stream holds %d jobs, want %d", n, 8*51)
	}
}

// An atomic batch's PubAck gives its id and count besides the last
// sequence.
func TestParseBatchPubAck(t *testing.T) {
	t.Parallel()
	a, err := parsePubAck([]byte(`{"stream":"SHAPER_p","seq":42,"batch":"b1","count":3}`))
	if err != nil || a != (pubAck{seq: 42, batch: "b1", count: 3}) {
		t.Fatalf("parsePubAck: %+v, %v", a, err)
	}
}

// A batch holds one slot of the window per message (at most the whole
// window) until it is answered: it waits for that room, and is refused
// errStalled without taking any when it does not come within stallWait.
func TestPublisherBatchWeighsOnWindow(t *testing.T) {
	t.Parallel()
	nc, _ := blackhole(t)
	got := make(answers, 10)
	pb := newPublisher(nc, 4, got.answer)
	pb.timeout = 300 * time.Millisecond
	batch := func(n int) []*nats.Msg {
		msgs := make([]*nats.Msg, n)
		for i := range msgs {
			msgs[i] = nats.NewMsg("blackhole")
		}
		return msgs
	}
	if err := pb.publishAll(batch(3), pendingPub{}); err != nil {
		t.Fatal(err)
	}
	if n := len(pb.window); n != 3 {
		t.Fatalf("a batch of 3 holds %d slots, want 3", n)
	}
	if err := pb.publishAll(batch(2), pendingPub{}); !errors.Is(err, errStalled) {
		t.Fatalf("a batch of 2 with 1 slot free: %v, want errStalled", err)
	}
	if n := len(pb.window); n != 3 {
		t.Fatalf("a refused batch left %d slots taken, want the first batch's 3", n)
	}
	if err := <-got; !errors.Is(err, errAckTimeout) {
		t.Fatalf("answer %v, want errAckTimeout", err)
	}
	if err := pb.publishAll(batch(10), pendingPub{}); err != nil {
		t.Fatalf("a batch larger than the window, window free: %v", err)
	}
	if n := len(pb.window); n != 4 {
		t.Fatalf("a batch of 10 holds %d slots, want the whole window, 4", n)
	}
	<-got
	if n := len(pb.window); n != 0 {
		t.Fatalf("%d slots still taken after every answer", n)
	}
}

// While the table of records cannot answer a miss (another instance, its
// records not loaded), the batch's ids are looked up in the records
// stream first.
func TestOfferAllLooksUpRecords(t *testing.T) {
	t.Parallel()
	st, _ := runStore(t)
	ls := QueueSettings{Name: "printer", Capacity: 10, Rate: 1}
	openQueue(t, st, ls)
	if _, err := st.js.PublishMsg(context.Background(), st.recordMsg("order-9", "j9", time.Now())); err != nil {
		t.Fatal(err)
	}
	other := runStoreOn(t, st)
	q, _ := other.Queue(ls)
	jobs := jobsNamed("a", "b")
	jobs[0].DedupeID, jobs[1].DedupeID = "order-9", "order-8"
	placed, err := offerAll(t, q, jobs)
	if err != nil || !placed[0].Duplicate || jobs[0].ID != "j9" || placed[1].Duplicate || placed[1].Position != 1 {
		t.Fatalf("%+v, %v, ids %q %q; want a duplicate of j9, b stored first", placed, err, jobs[0].ID, jobs[1].ID)
	}
}
