package shaper

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper/metrics"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recSink is an in-memory Sink recording every try. Its behaviour is fn
// (nil = succeed at once). Safe for concurrent use.
type recSink struct {
	t0 time.Time
	fn func(ctx context.Context, job *queue.Job) error

	mu          sync.Mutex
	tries       []try
	calls       []int // jobs per call (DeliverBatch)
	inflight    int
	maxInflight int
}

type try struct {
	at      time.Duration // since t0
	id      string
	attempt int
}

func newRecSink(fn func(context.Context, *queue.Job) error) *recSink {
	return &recSink{t0: time.Now(), fn: fn}
}

func (s *recSink) Deliver(ctx context.Context, job *queue.Job) (Feedback, error) {
	s.mu.Lock()
	s.tries = append(s.tries, try{time.Since(s.t0), job.ID, job.Attempt})
	s.inflight++
	s.maxInflight = max(s.maxInflight, s.inflight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inflight--
		s.mu.Unlock()
	}()
	if s.fn != nil {
		return Feedback{}, s.fn(ctx, job)
	}
	return Feedback{}, nil
}

// DeliverBatch records a try of each of c's jobs, all at one instant; the
// call fails with the first error fn returns for one of them.
func (s *recSink) DeliverBatch(ctx context.Context, c Call) (Feedback, error) {
	s.mu.Lock()
	at := time.Since(s.t0)
	for _, job := range c.Jobs {
		s.tries = append(s.tries, try{at, job.ID, job.Attempt})
	}
	s.calls = append(s.calls, len(c.Jobs))
	s.mu.Unlock()
	for _, job := range c.Jobs {
		if s.fn != nil {
			if err := s.fn(ctx, job); err != nil {
				return Feedback{}, err
			}
		}
	}
	return Feedback{}, nil
}

// noBatches makes a test sink a Sink whose downstream takes no batches.
type noBatches struct{}

func (noBatches) DeliverBatch(context.Context, Call) (Feedback, error) {
	return Feedback{}, errors.New("test sink: no batches")
}

func (s *recSink) starts() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]time.Duration, len(s.tries))
	for i, t := range s.tries {
		out[i] = t.at
	}
	return out
}

func (s *recSink) peak() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxInflight
}

func (s *recSink) all() []try {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]try(nil), s.tries...)
}

// recDL records dead letters.
type recDL struct {
	mu  sync.Mutex
	dls []DeadLetter
}

func (d *recDL) DeadLetter(_ context.Context, dl DeadLetter) (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dls = append(d.dls, dl)
	return uint64(len(d.dls)), nil
}

func (d *recDL) last() DeadLetter {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.dls) == 0 {
		return DeadLetter{}
	}
	return d.dls[len(d.dls)-1]
}

func (d *recDL) list() []DeadLetter {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]DeadLetter(nil), d.dls...)
}

func (d *recDL) reasons() map[Reason]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[Reason]int{}
	for _, dl := range d.dls {
		out[dl.Reason]++
	}
	return out
}

// laneCfg is a lane delivering to a placeholder spec (tests inject sinks).
func laneCfg(name string, rate float64, capacity int) LaneSettings {
	return LaneSettings{Name: name, Rate: rate, Capacity: capacity, DeadLetter: "dead." + name,
		Sink: SinkSpec{NATS: &NATSSinkSpec{Subject: "out." + name}}}
}

// harness runs a Shaper whose lanes deliver into sinks[name].
type harness struct {
	t      *testing.T
	sh     *Shaper
	dl     *recDL
	met    *metrics.Metrics
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, set Settings, sinks map[string]Sink) *harness {
	t.Helper()
	h := &harness{t: t, dl: &recDL{}, reg: prometheus.NewRegistry(), done: make(chan error, 1)}
	h.met = NewMetrics(h.reg)
	sh, err := New(set, Deps{
		Sinks: func(ls LaneSettings) (Sink, error) {
			if s, ok := sinks[ls.Name]; ok {
				return s, nil
			}
			return nil, errors.New("no test sink")
		},
		DeadLetter: h.dl, Metrics: h.met,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.sh = sh
	var ctx context.Context
	ctx, h.cancel = context.WithCancel(context.Background())
	go func() { h.done <- sh.Run(ctx) }()
	<-sh.Ready()
	return h
}

// stop cancels Run and waits for it.
func (h *harness) stop() {
	h.t.Helper()
	h.cancel()
	if err := <-h.done; err != nil {
		h.t.Errorf("Run: %v", err)
	}
}

func (h *harness) submit(downstream string, n int) []Receipt {
	out := make([]Receipt, n)
	for i := range out {
		out[i] = h.sh.Submit(&queue.Job{Downstream: downstream, Payload: []byte("x")})
	}
	return out
}

func (h *harness) status(name string) LaneStatus {
	for _, st := range h.sh.Lanes() {
		if st.Name == name {
			return st
		}
	}
	h.t.Fatalf("no lane %q", name)
	return LaneStatus{}
}

// secs converts fractional seconds to a Duration.
func secs(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

func wantStarts(t *testing.T, got []time.Duration, want ...float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("starts = %v, want %d starts at %v s", got, len(want), want)
	}
	for i, w := range want {
		if got[i] != secs(w) {
			t.Fatalf("start %d at %v, want %v (all: %v)", i, got[i], secs(w), got)
		}
	}
}
