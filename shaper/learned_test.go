package shaper

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/policy"
)

// memRates is a Rates in memory that records every call.
type memRates struct {
	mu    sync.Mutex
	kept  map[string]policy.Learned
	saves []policy.Learned
	loads int
	fail  error // returned by every call when set
}

func newMemRates() *memRates { return &memRates{kept: map[string]policy.Learned{}} }

func (m *memRates) Load(_ context.Context, name string) (policy.Learned, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loads++
	v, ok := m.kept[name]
	return v, ok, m.fail
}

func (m *memRates) Save(_ context.Context, name string, v policy.Learned) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.kept[name] = v
	m.saves = append(m.saves, v)
	return nil
}

func (m *memRates) put(name string, v policy.Learned) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.kept[name] = v
}

func (m *memRates) calls() (saves []policy.Learned, loads int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]policy.Learned(nil), m.saves...), m.loads
}

// keptHarness is a running shaper whose lanes keep their rates in r.
type keptHarness struct {
	*harness
}

func startKept(t *testing.T, r Rates, lanes ...LaneSettings) keptHarness {
	t.Helper()
	h := &harness{t: t, dl: &recDL{}, reg: prometheus.NewRegistry(), done: make(chan error, 1)}
	h.met = NewMetrics(h.reg)
	sh, err := New(Settings{Lanes: lanes}, Deps{
		Sinks:      func(LaneSettings) (Sink, error) { return newRecSink(nil), nil },
		DeadLetter: h.dl, Metrics: h.met, Rates: r,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.sh = sh
	var ctx context.Context
	ctx, h.cancel = context.WithCancel(context.Background())
	go func() { h.done <- sh.Run(ctx) }()
	<-sh.Ready()
	return keptHarness{h}
}

// learn sets lane name's effective rate as if its controller had learned it.
func (h keptHarness) learn(name string, rate float64) {
	l := h.sh.active[name]
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setRate(rate)
}

func (h keptHarness) rate(name string) float64 {
	return testutil.ToFloat64(h.met.Rate.WithLabelValues(name))
}

func adaptiveCfg(name string, ceiling float64) LaneSettings {
	cfg := laneCfg(name, ceiling, 100)
	cfg.Adaptive = true
	return cfg
}

// TestKeptRateSurvivesRestart: a learned rate is saved on the next 2 s
// tick, not again while unchanged, and a new shaper on the same store
// starts at it (metric and status) before any job; nothing learned means
// nothing saved.
func TestKeptRateSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newMemRates()
		t0 := time.Now()
		h := startKept(t, r, adaptiveCfg("api", 100), laneCfg("fixed", 100, 10))
		time.Sleep(3 * time.Second)
		if saves, loads := r.calls(); len(saves) != 0 || loads != 1 {
			t.Fatalf("at the ceiling: saves %v loads %d, want none and one (the adaptive lane's)", saves, loads)
		}
		h.learn("api", 37)
		h.learn("fixed", 12) // a fixed lane keeps nothing
		time.Sleep(10 * time.Second)
		saves, _ := r.calls()
		if want := (policy.Learned{Rate: 37, At: t0.Add(4 * time.Second)}); len(saves) != 1 || saves[0] != want {
			t.Fatalf("saves %v, want one %v", saves, want)
		}
		h.stop()
		if saves, _ := r.calls(); len(saves) != 1 {
			t.Errorf("unchanged at shutdown, saved again: %v", saves)
		}

		h2 := startKept(t, r, adaptiveCfg("api", 100))
		defer h2.stop()
		if got, st := h2.rate("api"), h2.status("api"); got != 37 || st.EffectiveRate != 37 {
			t.Errorf("restarted at %v (status %v), want the kept 37", got, st.EffectiveRate)
		}
	})
}

// TestKeptRateBounds: a kept value is capped by the ceiling (and a reload
// that lowers the ceiling caps it at once, then keeps the capped rate),
// floored at 5 % of it, and ignored when older than LearnedMaxAge or not
// sane.
func TestKeptRateBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    policy.Learned
		age  time.Duration
		want float64
	}{
		{"kept", policy.Learned{Rate: 40}, time.Minute, 40},
		{"capped", policy.Learned{Rate: 80}, time.Minute, 50},
		{"floored", policy.Learned{Rate: 0.1}, time.Minute, 2.5},
		{"almost stale", policy.Learned{Rate: 40}, policy.LearnedMaxAge, 40},
		{"stale", policy.Learned{Rate: 40}, policy.LearnedMaxAge + time.Second, 50},
		{"zero", policy.Learned{Rate: 0}, time.Minute, 50},
		{"negative window", policy.Learned{Rate: 40, Window: -time.Second}, time.Minute, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newMemRates()
				tc.v.At = time.Now().Add(-tc.age)
				r.put("api", tc.v)
				h := startKept(t, r, adaptiveCfg("api", 50))
				defer h.stop()
				if got := h.rate("api"); got != tc.want {
					t.Errorf("started at %v, want %v", got, tc.want)
				}
			})
		})
	}
}

// TestKeptRateReloadCaps: a reload that lowers the ceiling caps a restored
// rate at once; the capped rate is kept on the next tick.
func TestKeptRateReloadCaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newMemRates()
		t0 := time.Now()
		r.put("api", policy.Learned{Rate: 40, Window: time.Second, At: t0.Add(-time.Minute)})
		h := startKept(t, r, adaptiveCfg("api", 100))
		defer h.stop()
		time.Sleep(time.Second)
		if got := h.rate("api"); got != 40 {
			t.Fatalf("started at %v, want 40", got)
		}
		if err := h.sh.Apply(Settings{Lanes: []LaneSettings{adaptiveCfg("api", 30)}}); err != nil {
			t.Fatal(err)
		}
		if got := h.rate("api"); got != 30 {
			t.Errorf("after the reload: %v, want the new ceiling 30", got)
		}
		time.Sleep(2 * time.Second)
		if saves, loads := r.calls(); len(saves) != 1 || saves[0] != (policy.Learned{Rate: 30, Window: time.Second, At: t0.Add(2 * time.Second)}) || loads != 1 {
			t.Errorf("saves %v loads %d, want the capped 30 saved at 2s with the window it learned, and no read on reload", saves, loads)
		}
	})
}

// TestKeptRateTakeover: a lane whose queue hands it jobs after it started
// nothing for 5 s reads the kept value first, and starts nothing until the
// answer: another instance may have drained (and learned) meanwhile. A
// lane that is draining does not read.
func TestKeptRateTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newMemRates()
		t0 := time.Now()
		q := &readyQueue{Bucket: queue.NewBucket(queue.Settings{Capacity: 100})}
		sink := newRecSink(nil)
		h := &harness{t: t, dl: &recDL{}, reg: prometheus.NewRegistry(), done: make(chan error, 1)}
		h.met = NewMetrics(h.reg)
		cfg := adaptiveCfg("api", 100)
		cfg.Durable = true
		sh, err := New(Settings{Lanes: []LaneSettings{cfg}}, Deps{
			Sinks: func(LaneSettings) (Sink, error) { return sink, nil }, Metrics: h.met, Rates: r,
			Queues: func(LaneSettings) (queue.Roles, error) { return queue.Roles{Queue: q, Memory: q, Service: q}, nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		h.sh = sh
		ctx, cancel := context.WithCancel(context.Background())
		h.cancel = cancel
		go func() { h.done <- sh.Run(ctx) }()
		defer h.stop()
		kh := keptHarness{h}

		time.Sleep(10 * time.Second)
		r.put("api", policy.Learned{Rate: 20, At: t0.Add(9 * time.Second)}) // the other instance's
		if err := sh.Pause("api"); err != nil {                             // so that the submission cannot start before the fetch
			t.Fatal(err)
		}
		h.submit("api", 3)
		q.ready() // the fetch: jobs after a gap
		if err := sh.Resume("api"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := kh.rate("api"); got != 20 {
			t.Errorf("rate after the takeover %v, want the kept 20", got)
		}
		wantStarts(t, sink.starts(), 10, 10.05, 10.1)
		q.ready() // draining: no read
		if _, loads := r.calls(); loads != 2 {
			t.Errorf("%d reads, want 2 (start, takeover)", loads)
		}
	})
}

// readyQueue is a memory queue that, like a durable one, calls the lane
// back when it "fetched" jobs (it plays queue.Service).
type readyQueue struct {
	*queue.Bucket
	ready func()
}

func (q *readyQueue) Notify(ready func())         { q.ready = ready }
func (q *readyQueue) Start(context.Context) error { return nil }
func (q *readyQueue) Stop() error                 { return nil }

// TestKeptRateStoreDown: a store that fails is logged and ignored; the
// lane starts at its ceiling and keeps trying to save.
func TestKeptRateStoreDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newMemRates()
		r.fail = errors.New("nats: timeout")
		h := startKept(t, r, adaptiveCfg("api", 100))
		defer h.stop()
		if got := h.rate("api"); got != 100 {
			t.Errorf("started at %v, want the ceiling", got)
		}
		h.learn("api", 37)
		time.Sleep(5 * time.Second)
		r.mu.Lock()
		r.fail = nil
		r.mu.Unlock()
		time.Sleep(2 * time.Second)
		if saves, _ := r.calls(); len(saves) != 1 || saves[0].Rate != 37 {
			t.Errorf("saves %v, want 37 once the store is back", saves)
		}
	})
}
