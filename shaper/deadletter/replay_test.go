package deadletter

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper"
)

// memDead is a dead-letter store in memory, as *Store
// behaves: oldest first, filtered by Shaper-Reason. Safe for concurrent use.
type memDead struct {
	mu      sync.Mutex
	held    []Stored
	deleted []uint64
}

func (m *memDead) put(seq uint64, reason, jobID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := nats.Header{}
	h.Set("Shaper-Reason", reason)
	h.Set("Shaper-Job-Id", jobID)
	h.Set("Shaper-Attempt", "2")
	h.Set("Content-Type", "text/plain")
	h.Set("Shaper-Key", "tenant-1")
	m.held = append(m.held, Stored{Seq: seq, Header: h, Data: []byte("job " + jobID), Size: 4 + len(jobID)})
}

func (m *memDead) List(_ context.Context, _ string, f Filter) ([]Stored, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Stored
	total := 0
	for _, dl := range m.held {
		if dl.Seq > f.After && (f.Reason == "" || dl.Header.Get("Shaper-Reason") == f.Reason) {
			total++
			if f.Limit == 0 || len(out) < f.Limit {
				dl.Data = nil
				out = append(out, dl)
			}
		}
	}
	return out, total, nil
}

func (m *memDead) Get(_ context.Context, _ string, seq uint64) (Stored, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, dl := range m.held {
		if dl.Seq == seq {
			return dl, nil
		}
	}
	return Stored{}, ErrNotFound
}

func (m *memDead) Delete(_ context.Context, _ string, seq uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, dl := range m.held {
		if dl.Seq == seq {
			m.held = slices.Delete(m.held, i, i+1)
			m.deleted = append(m.deleted, seq)
			return nil
		}
	}
	return ErrNotFound
}

func (m *memDead) Purge(context.Context, string) error { return nil }

func (m *memDead) seqs() []uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []uint64
	for _, dl := range m.held {
		out = append(out, dl.Seq)
	}
	return out
}

// memPlans are Plans in memory with the KV bucket's revisions.
type memPlans struct {
	mu    sync.Mutex
	plans map[string]replayPlan
	rev   uint64
	saves int
}

func (m *memPlans) load(context.Context) ([]replayPlan, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []replayPlan
	for _, p := range m.plans {
		out = append(out, p)
	}
	return out, nil
}

func (m *memPlans) create(_ context.Context, p *replayPlan) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rev++
	p.rev = m.rev
	m.plans[p.Downstream] = *p
	return nil
}

func (m *memPlans) save(_ context.Context, p *replayPlan) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.plans[p.Downstream]; !ok || cur.rev != p.rev {
		return errTakenOver
	}
	m.rev++
	m.saves++
	p.rev = m.rev
	m.plans[p.Downstream] = *p
	return nil
}

func (m *memPlans) remove(_ context.Context, p replayPlan) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.plans[p.Downstream]; ok && cur.rev == p.rev {
		delete(m.plans, p.Downstream)
	}
	return nil
}

func (m *memPlans) get(name string) (replayPlan, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.plans[name]
	return p, ok
}

// delivery is one job a lane started.
type delivery struct {
	at  time.Duration
	id  string
	key string
	hdr string // Content-Type
}

// recorder is a sink recording every start.
type recorder struct {
	shaper.Sink // DeliverBatch: not used (no batches)
	t0          time.Time
	mu          sync.Mutex
	d           []delivery
}

func (r *recorder) Deliver(_ context.Context, job *queue.Job) (shaper.Feedback, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.d = append(r.d, delivery{time.Since(r.t0), job.ID, job.Key, job.Header.Get("Content-Type")})
	return shaper.Feedback{}, nil
}

func (r *recorder) all() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.d)
}

// replayRig is a running shaper with lane printer (10/s) behind a
// replays manager over a memDead and memPlans.
type replayRig struct {
	rs    *Replays
	dead  *memDead
	plans *memPlans
	sink  *recorder
	reg   *prometheus.Registry
	stop  func()
}

func newReplayRig(t *testing.T, dead *memDead, plans *memPlans) *replayRig {
	t.Helper()
	rig := &replayRig{dead: dead, plans: plans, sink: &recorder{t0: time.Now()}, reg: prometheus.NewRegistry()}
	sh, err := shaper.New(shaper.Settings{Lanes: []shaper.LaneSettings{{Name: "printer", Rate: 10, Capacity: 10,
		Sink: shaper.SinkSpec{NATS: &shaper.NATSSinkSpec{Subject: "out"}}}}},
		shaper.Deps{Sinks: func(shaper.LaneSettings) (shaper.Sink, error) { return rig.sink, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sh.Run(ctx) }()
	met := NewMetrics(rig.reg)
	rig.rs = NewReplays(met, slog.New(slog.DiscardHandler))
	met.Labels([]string{"printer"}, nil)
	rig.rs.Attach(&ReplayDeps{Store: dead, Target: sh, Plans: plans, KeyHeader: "Shaper-Key",
		Rate: func(name string) (float64, bool) { return 10, name == "printer" }})
	if err := rig.rs.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rig.stop = func() {
		_ = rig.rs.Stop()
		cancel()
		<-done
	}
	return rig
}

func (rig *replayRig) replayed() float64 {
	return testutil.ToFloat64(rig.rs.replayed.WithLabelValues("printer"))
}

func wantDeliveries(t *testing.T, got []delivery, ids []string, at []float64) {
	t.Helper()
	if len(got) != len(ids) {
		t.Fatalf("deliveries %+v, want %v", got, ids)
	}
	for i, d := range got {
		if d.id != ids[i] || d.at != time.Duration(at[i]*float64(time.Second)) {
			t.Fatalf("delivery %d: %+v, want %s at %vs (all: %+v)", i, d, ids[i], at[i], got)
		}
	}
}

// A replay goes oldest first at its rate, filtered by reason; each job
// keeps its id, key and headers, leaves the store once queued and is
// counted; the plan is saved after each and deleted at the end.
func TestReplayPacedByReason(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dead, plans := &memDead{}, &memPlans{plans: map[string]replayPlan{}}
		for seq := uint64(1); seq <= 6; seq++ {
			reason := "failed"
			if seq == 3 {
				reason = "expired"
			}
			dead.put(seq, reason, fmt.Sprintf("job%d", seq))
		}
		rig := newReplayRig(t, dead, plans)
		defer rig.stop()
		n, err := rig.rs.Replace(t.Context(), "printer", ReplayRequest{Rate: 2, Reason: "failed", Limit: 4})
		if err != nil || n != 4 {
			t.Fatalf("replace: %d, %v; want 4", n, err)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		got := rig.sink.all()
		wantDeliveries(t, got, []string{"job1", "job2", "job4", "job5"}, []float64{0, 0.5, 1, 1.5})
		if got[0].key != "tenant-1" || got[0].hdr != "text/plain" {
			t.Errorf("replayed job %+v, want key tenant-1 and the producer's Content-Type", got[0])
		}
		if s := dead.seqs(); !slices.Equal(s, []uint64{3, 6}) {
			t.Errorf("store holds %v, want [3 6] (expired, and past the limit)", s)
		}
		if v := rig.replayed(); v != 4 {
			t.Errorf("shaper_dead_letters_replayed_total = %v, want 4", v)
		}
		if _, ok := plans.get("printer"); ok || plans.saves != 4 {
			t.Errorf("plan left %v, saved %d times; want deleted after 4 saves", ok, plans.saves)
		}
	})
}

// A stopped replay keeps its plan; the next start resumes it where it
// was, and a dead letter that arrived after the request is not its own.
func TestReplayResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dead, plans := &memDead{}, &memPlans{plans: map[string]replayPlan{}}
		for seq := uint64(1); seq <= 4; seq++ {
			dead.put(seq, "failed", fmt.Sprintf("job%d", seq))
		}
		rig := newReplayRig(t, dead, plans)
		if n, err := rig.rs.Replace(t.Context(), "printer", ReplayRequest{Rate: 1}); n != 4 || err != nil {
			t.Fatalf("replace: %d, %v", n, err)
		}
		time.Sleep(1500 * time.Millisecond) // job1 at 0, job2 at 1
		rig.stop()
		p, ok := plans.get("printer")
		if !ok || p.Remaining != 2 || p.After != 2 || p.Through != 4 {
			t.Fatalf("plan after stop: %+v (%v), want 2 remaining after seq 2, through 4", p, ok)
		}
		dead.put(5, "failed", "job5") // a later dead letter: not this replay's
		rig = newReplayRig(t, dead, plans)
		defer rig.stop()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		wantDeliveries(t, rig.sink.all(), []string{"job3", "job4"}, []float64{0, 1})
		if s := dead.seqs(); !slices.Equal(s, []uint64{5}) {
			t.Errorf("store holds %v, want [5]", s)
		}
		if _, ok := plans.get("printer"); ok {
			t.Error("plan still stored after the resumed replay finished")
		}
	})
}

// A new request replaces a running replay's settings; a plan taken over
// (by another instance) stops its replayer.
func TestReplayReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dead, plans := &memDead{}, &memPlans{plans: map[string]replayPlan{}}
		for seq := uint64(1); seq <= 5; seq++ {
			dead.put(seq, "failed", fmt.Sprintf("job%d", seq))
		}
		rig := newReplayRig(t, dead, plans)
		defer rig.stop()
		if n, _ := rig.rs.Replace(t.Context(), "printer", ReplayRequest{Rate: 0.1}); n != 5 {
			t.Fatalf("first replay: %d, want 5", n)
		}
		time.Sleep(time.Second) // job1 at 0; the next in 10 s
		if n, _ := rig.rs.Replace(t.Context(), "printer", ReplayRequest{Rate: 5, Limit: 2}); n != 2 {
			t.Fatalf("second replay: %d, want 2", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		wantDeliveries(t, rig.sink.all(), []string{"job1", "job2", "job3"}, []float64{0, 1, 1.2})
		// Another instance takes the next plan over: this one stops after
		// the entry it was replaying.
		if n, _ := rig.rs.Replace(t.Context(), "printer", ReplayRequest{Rate: 1}); n != 2 {
			t.Fatalf("third replay: %d, want 2", n)
		}
		p, _ := plans.get("printer")
		p.Rate, p.rev = 0.001, p.rev+100
		plans.mu.Lock()
		plans.plans["printer"] = p
		plans.mu.Unlock()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := rig.sink.all(); len(got) != 4 || got[3].id != "job4" {
			t.Errorf("deliveries %+v, want job4 then nothing (taken over)", got)
		}
		if _, err := rig.rs.Replace(t.Context(), "nope", ReplayRequest{}); err == nil {
			t.Error("replay of an unknown downstream: no error")
		}
	})
}
