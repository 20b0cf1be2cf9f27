package shaper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/batch"
	"github.com/shaperd/shaper/shaper/policy"
	"github.com/shaperd/shaper/shaper/settings"
)

func batchCfg(rate float64, maxJobs int) LaneSettings {
	cfg := laneCfg("erp", rate, 1000)
	cfg.Batch = BatchSettings{MaxJobs: maxJobs, MaxBytes: 1 << 20, Encoding: string(batch.NDJSON)}
	return cfg
}

// submitN submits n jobs while downstream is paused, so that they wait
// for the lane's first call together.
func submitN(t *testing.T, sh *Shaper, downstream string, n int) {
	t.Helper()
	if err := sh.Pause(downstream); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := sh.Resume(downstream); err != nil {
			t.Fatal(err)
		}
	}()
	for i := range n {
		if rc := sh.Submit(&queue.Job{Downstream: downstream, ID: fmt.Sprintf("j%02d", i), Payload: []byte("x")}); !rc.Accepted {
			t.Fatalf("job %d not accepted: %+v", i, rc)
		}
	}
}

// 25 jobs at 2 calls a second with max_jobs 10: three calls, of 10, 10
// and 5 jobs, 1/rate apart, each job once.
func TestBatchCallsCarryMaxJobsAtTheCallRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecSink(nil)
		h := start(t, Settings{Lanes: []LaneSettings{batchCfg(2, 10)}}, map[string]Sink{"erp": sink})
		defer h.stop()
		submitN(t, h.sh, "erp", 25)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		sink.mu.Lock()
		calls, tries := append([]int(nil), sink.calls...), append([]try(nil), sink.tries...)
		sink.mu.Unlock()
		if fmt.Sprint(calls) != "[10 10 5]" {
			t.Fatalf("calls carried %v jobs; want [10 10 5]", calls)
		}
		seen := map[string]bool{}
		for i, tr := range tries {
			if seen[tr.id] {
				t.Errorf("job %s delivered twice", tr.id)
			}
			seen[tr.id] = true
			if call := i / 10; tr.at < time.Duration(call)*500*time.Millisecond {
				t.Errorf("job %s of call %d started at %v, before the call's slot", tr.id, call, tr.at)
			}
		}
		st := h.sh.Lanes()[0]
		if st.EffectiveRate != 2 || st.Batch == nil || *st.Batch != (BatchStatus{MaxJobs: 10, MaxBytes: 1 << 20, Encoding: "ndjson", Calls: 3, Jobs: 25}) {
			t.Errorf("status: effective rate %v, batch %+v; want 2 calls/s, 3 calls carrying 25 jobs", st.EffectiveRate, st.Batch)
		}
	})
}

// A payload the lane's encoding cannot carry is refused at intake, naming
// the encoding.
func TestBatchRefusesAPayloadItsEncodingCannotCarry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Settings{Lanes: []LaneSettings{batchCfg(2, 10)}}, map[string]Sink{"erp": newRecSink(nil)})
		defer h.stop()
		rc := h.sh.Submit(&queue.Job{Downstream: "erp", Payload: []byte("two\nlines")})
		if rc.Accepted || rc.Reason != ReasonBadRequest || !strings.Contains(rc.Err.Error(), "ndjson") {
			t.Fatalf("receipt %+v (%v); want bad_request naming ndjson", rc, rc.Err)
		}
	})
}

// failSink answers every call with fb and err, noting the attempts of
// each job.
type failSink struct {
	mu       sync.Mutex
	fb       func(c Call) (Feedback, error)
	attempts map[string][]int
}

func (s *failSink) Deliver(context.Context, *queue.Job) (Feedback, error) {
	return Feedback{}, errors.New("not a batch")
}

func (s *failSink) DeliverBatch(_ context.Context, c Call) (Feedback, error) {
	s.mu.Lock()
	for _, j := range c.Jobs {
		s.attempts[j.ID] = append(s.attempts[j.ID], j.Attempt)
	}
	s.mu.Unlock()
	return s.fb(c)
}

// The answer's failures are each job's own: retry false dead-letters that
// job alone, retry true retries it alone; a 5xx retries every job of the
// call, and the breaker counts one failure per call.
func TestBatchAnswersAreEachJobsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		sink := &failSink{attempts: map[string][]int{}, fb: func(c Call) (Feedback, error) {
			calls++
			switch calls {
			case 1:
				return Feedback{Failed: map[string]batch.Failure{
					"j00": {JobID: "j00", Error: "bad sku", Retry: false},
					"j01": {JobID: "j01", Error: "locked", Retry: true}}}, nil
			case 2:
				return Feedback{}, errors.New("POST /import: 502 Bad Gateway")
			}
			return Feedback{}, nil
		}}
		cfg := batchCfg(10, 10)
		cfg.Retry = RetryPolicy{MaxAttempts: 5, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}
		h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"erp": sink})
		defer h.stop()
		submitN(t, h.sh, "erp", 3)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		sink.mu.Lock()
		defer sink.mu.Unlock()
		// call 1: j00 failed for good, j01 retried, j02 succeeded.
		// call 2 (j01): 502, retried. call 3 (j01): succeeded.
		if got := fmt.Sprint(sink.attempts["j00"], sink.attempts["j01"], sink.attempts["j02"]); got != "[1] [1 2 3] [1]" {
			t.Fatalf("attempts j00 j01 j02: %s; want [1] [1 2 3] [1]", got)
		}
		dls := h.dl.list()
		if len(dls) != 1 || dls[0].Job.ID != "j00" || !strings.Contains(dls[0].Err, "bad sku") {
			t.Fatalf("dead letters %+v; want j00 alone, with its error", dls)
		}
	})
}

// A pushback holds every job of the call without using an attempt, and
// counts once.
func TestBatchPushbackHoldsTheWholeCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		sink := &failSink{attempts: map[string][]int{}, fb: func(c Call) (Feedback, error) {
			calls++
			if calls == 1 {
				return Feedback{}, &policy.PushbackError{RetryAfter: time.Second, Err: errors.New("503")}
			}
			return Feedback{}, nil
		}}
		h := start(t, Settings{Lanes: []LaneSettings{batchCfg(10, 10)}}, map[string]Sink{"erp": sink})
		defer h.stop()
		submitN(t, h.sh, "erp", 4)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		sink.mu.Lock()
		defer sink.mu.Unlock()
		for _, id := range []string{"j00", "j01", "j02", "j03"} {
			if got := fmt.Sprint(sink.attempts[id]); got != "[1 2]" {
				t.Errorf("%s tries %s; want [1 2] (the pushed-back call, then the next)", id, got)
			}
		}
		if st := h.sh.Lanes()[0]; st.Pushbacks != 1 {
			t.Errorf("%d pushbacks counted; want 1 for the call", st.Pushbacks)
		}
	})
}

// The configuration's encodings are the ones package batch encodes.
func TestBatchEncodingsAreBatchs(t *testing.T) {
	var names []string
	for _, e := range batch.Encodings {
		names = append(names, string(e))
	}
	if fmt.Sprint(names) != fmt.Sprint(settings.BatchEncodings) {
		t.Fatalf("settings.BatchEncodings %v, batch.Encodings %v", settings.BatchEncodings, names)
	}
}

// linger fills a call from jobs arriving 50 ms apart: the first call
// waits 200 ms from when it could start and carries the jobs that came
// meanwhile, not the first alone; a job's max wait cuts the linger short.
func TestBatchLingerFillsACallWithinMaxWait(t *testing.T) {
	for _, c := range []struct {
		name    string
		maxWait time.Duration
		first   []int         // jobs in the first call (the job sent as the linger ends may be in it or not)
		at      time.Duration // when it started
	}{
		{"linger", 0, []int{4, 5}, 200 * time.Millisecond},
		// j0's deadline is at 120 ms: the call starts by then, less the
		// scheduler's catch-up (20 ms), with the jobs come meanwhile.
		{"max wait", 120 * time.Millisecond, []int{2, 3}, 100 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sink := newRecSink(nil)
				cfg := batchCfg(2, 10)
				cfg.Batch.Linger = 200 * time.Millisecond
				cfg.MaxWait = c.maxWait
				h := start(t, Settings{Lanes: []LaneSettings{cfg}}, map[string]Sink{"erp": sink})
				defer h.stop()
				for i := range 8 {
					if rc := h.sh.Submit(&queue.Job{Downstream: "erp", ID: fmt.Sprintf("j%d", i), Payload: []byte("x")}); !rc.Accepted {
						t.Fatalf("job %d: %+v", i, rc)
					}
					time.Sleep(50 * time.Millisecond)
					synctest.Wait()
				}
				time.Sleep(2 * time.Second)
				synctest.Wait()
				sink.mu.Lock()
				defer sink.mu.Unlock()
				if len(sink.calls) == 0 || !slices.Contains(c.first, sink.calls[0]) || sink.tries[0].at != c.at {
					t.Fatalf("calls %v, the first at %v; want the first with %v jobs at %v", sink.calls, sink.tries[0].at, c.first, c.at)
				}
				if n := len(sink.tries); c.maxWait == 0 && n != 8 {
					t.Fatalf("%d jobs delivered; want 8", n)
				}
			})
		})
	}
}

// An override of max_jobs applies to the next call, as a new rate does;
// on a lane without a batch it is refused, naming the key.
func TestBatchMaxJobsOverride(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecSink(nil)
		h := start(t, Settings{Lanes: []LaneSettings{batchCfg(2, 10), laneCfg("mail", 2, 10)}},
			map[string]Sink{"erp": sink, "mail": newRecSink(nil)})
		defer h.stop()
		if err := h.sh.SetOverride("erp", Override{MaxJobs: 4}); err != nil {
			t.Fatal(err)
		}
		submitN(t, h.sh, "erp", 10)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		sink.mu.Lock()
		calls := fmt.Sprint(sink.calls)
		sink.mu.Unlock()
		if calls != "[4 4 2]" {
			t.Errorf("calls carried %s jobs after max_jobs 4; want [4 4 2]", calls)
		}
		if st := h.sh.Lanes()[0]; st.Batch == nil || st.Batch.MaxJobs != 4 || st.Override == nil || st.Override.MaxJobs != 4 {
			t.Errorf("status %+v %+v; want max_jobs 4, overridden", st.Batch, st.Override)
		}
		// A reload's max_jobs applies once the override is gone.
		if err := h.sh.SetOverride("erp", Override{}); err != nil {
			t.Fatal(err)
		}
		cfg := batchCfg(2, 3)
		if err := h.sh.Apply(Settings{Lanes: []LaneSettings{cfg, laneCfg("mail", 2, 10)}}); err != nil {
			t.Fatal(err)
		}
		submitN(t, h.sh, "erp", 5)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		sink.mu.Lock()
		calls = fmt.Sprint(sink.calls)
		sink.mu.Unlock()
		if calls != "[4 4 2 3 2]" {
			t.Errorf("calls carried %s jobs; want [4 4 2] then, reloaded with max_jobs 3, [3 2]", calls)
		}
		err := h.sh.SetOverride("mail", Override{MaxJobs: 4})
		if !errors.Is(err, ErrInvalidOverride) || !strings.Contains(err.Error(), "max_jobs") {
			t.Errorf("max_jobs over a lane without a batch: %v; want ErrInvalidOverride naming max_jobs", err)
		}
	})
}

// Position and eta count calls of max_jobs: at 2 calls/s with max_jobs
// 10, the jobs 1-10 in the queue start with the next call, 11-20 with the
// one 500 ms later.
func TestBatchETACountsCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Settings{Lanes: []LaneSettings{batchCfg(2, 10)}}, map[string]Sink{"erp": newRecSink(nil)})
		defer h.stop()
		// A first call starts at once and makes the next 500 ms away.
		if rc := h.sh.Submit(&queue.Job{Downstream: "erp", Payload: []byte("x")}); !rc.Accepted {
			t.Fatal(rc)
		}
		synctest.Wait()
		for i := 1; i <= 21; i++ {
			rc := h.sh.Submit(&queue.Job{Downstream: "erp", Payload: []byte("x")})
			want := time.Duration((i-1)/10)*500*time.Millisecond + 500*time.Millisecond
			if !rc.Accepted || rc.Position != i || rc.ETA != want {
				t.Errorf("job %d: position %d, eta %v; want eta %v", i, rc.Position, rc.ETA, want)
			}
		}
	})
}

// A job queued before its lane took a batch (or changed its encoding)
// that the encoding cannot carry fails alone when its call is gathered;
// the rest go in the call.
func TestBatchEncodingChangeFailsWhatItCannotCarry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecSink(nil)
		h := start(t, Settings{Lanes: []LaneSettings{laneCfg("erp", 2, 100)}}, map[string]Sink{"erp": sink})
		defer h.stop()
		if err := h.sh.Pause("erp"); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"one", "two\nlines", "three"} {
			if rc := h.sh.Submit(&queue.Job{Downstream: "erp", ID: p[:3], Payload: []byte(p)}); !rc.Accepted {
				t.Fatalf("%q: %+v", p, rc)
			}
		}
		if err := h.sh.Apply(Settings{Lanes: []LaneSettings{batchCfg(2, 10)}}); err != nil {
			t.Fatal(err)
		}
		if err := h.sh.Resume("erp"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		sink.mu.Lock()
		calls, tries := fmt.Sprint(sink.calls), len(sink.tries)
		sink.mu.Unlock()
		if calls != "[2]" || tries != 2 {
			t.Errorf("calls %s, %d jobs; want one call of the 2 that ndjson carries", calls, tries)
		}
		dls := h.dl.list()
		if len(dls) != 1 || dls[0].Job.ID != "two" || !strings.Contains(dls[0].Err, "ndjson") {
			t.Errorf("dead letters %+v; want the job with a newline alone, naming ndjson", dls)
		}
	})
}
