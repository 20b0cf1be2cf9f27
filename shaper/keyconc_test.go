package shaper

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shaperd/shaper/queue"
)

// keyConcRun runs a lane at 10/s with concurrency 4 and the given
// key_concurrency (fairness when fair): a slow tenant's five jobs, each
// held 1.05 s by the downstream, are submitted before a fast tenant's ten,
// and one more job of a third key at 2.16 s.
// It returns the starts as "key@ms" in order, and the most tries of the
// slow key in flight at once.
func keyConcRun(t *testing.T, keyConc int, fair bool) (starts []string, slowPeak int) {
	var (
		mu       sync.Mutex
		inflight int
	)
	sink := newRecSink(func(ctx context.Context, j *queue.Job) error {
		if j.Key != "slow" {
			return nil
		}
		mu.Lock()
		inflight++
		slowPeak = max(slowPeak, inflight)
		mu.Unlock()
		defer func() { mu.Lock(); inflight--; mu.Unlock() }()
		select {
		case <-time.After(1050 * time.Millisecond):
		case <-ctx.Done():
		}
		return nil
	})
	cfg := laneCfg("api", 10, 100)
	cfg.Concurrency, cfg.KeyConcurrency, cfg.Fairness = 4, keyConc, fair
	h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"api": sink})
	defer h.stop()
	// Paused while the jobs arrive, all at instant 0: else the scheduler's
	// goroutine may take the first job before the fast ones are queued or
	// after, and the fair order depends on which.
	if err := h.sh.Pause("api"); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		h.sh.Submit(&queue.Job{Downstream: "api", Key: "slow", ID: fmt.Sprint("slow", i)})
	}
	for i := range 10 {
		h.sh.Submit(&queue.Job{Downstream: "api", Key: "fast", ID: fmt.Sprint("fast", i)})
	}
	if err := h.sh.Resume("api"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2160 * time.Millisecond) // just after a slow job started on its key's freeing: no catch-up for it
	h.sh.Submit(&queue.Job{Downstream: "api", Key: "late", ID: "late"})
	time.Sleep(8 * time.Second)
	synctest.Wait()
	for _, tr := range sink.all() {
		starts = append(starts, fmt.Sprintf("%s@%d", tr.id, tr.at.Milliseconds()))
	}
	if st := h.status("api"); st.Delivered[OutcomeSuccess] != 16 || st.Depth != 0 || st.KeyConcurrency != keyConc {
		t.Errorf("status: delivered %v, depth %d, key_concurrency %d; want 16, 0, %d",
			st.Delivered, st.Depth, st.KeyConcurrency, keyConc)
	}
	return starts, slowPeak
}

// TestKeyConcurrency: with key_concurrency 1 the slow tenant has one try
// in flight at a time while the fast tenant's jobs start at the lane's
// rate; each slow job, kept at the front of the FIFO, starts at the next
// slot once its key frees, with no catch-up for the slots it waited (the
// late job takes the slot after, a full interval later).
func TestKeyConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		starts, peak := keyConcRun(t, 1, false)
		want := "[slow0@0 fast0@100 fast1@200 fast2@300 fast3@400 fast4@500 fast5@600 fast6@700 fast7@800 fast8@900 fast9@1000 " +
			"slow1@1100 slow2@2150 late@2250 slow3@3200 slow4@4250]"
		if got := fmt.Sprint(starts); got != want {
			t.Errorf("starts\n%s\nwant\n%s", got, want)
		}
		if peak != 1 {
			t.Errorf("slow tenant had %d in flight, want at most 1", peak)
		}
	})
	synctest.Test(t, func(t *testing.T) { // without it the slow tenant holds every slot
		starts, peak := keyConcRun(t, 0, false)
		if peak != 4 || fmt.Sprint(starts[:4]) != "[slow0@0 slow1@100 slow2@200 slow3@300]" {
			t.Errorf("without key_concurrency: slow peak %d, starts %v; want 4 and the slow jobs first", peak, starts)
		}
	})
}

// TestKeyConcurrencyFair: under fairness a capped key earns no turns while
// it waits: the fast key is served at the rate, the slow one resumes at
// its next turn once it frees.
func TestKeyConcurrencyFair(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		starts, peak := keyConcRun(t, 2, true)
		want := "[slow0@0 fast0@100 slow1@200 fast1@300 fast2@400 fast3@500 fast4@600 fast5@700 fast6@800 fast7@900 fast8@1000 " +
			"slow2@1100 fast9@1200 slow3@1300 slow4@2150 late@2250]"
		if got := fmt.Sprint(starts); got != want {
			t.Errorf("starts\n%s\nwant\n%s", got, want)
		}
		if peak != 2 {
			t.Errorf("slow tenant had %d in flight, want 2", peak)
		}
	})
}
