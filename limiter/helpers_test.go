package limiter

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The package promises no goroutines; goleak holds it to that.
	goleak.VerifyTestMain(m)
}

// t0 is 12:00:00 UTC, a minute boundary, the origin of every fixed-time test.
var t0 = time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// stepper runs one algorithm over one state through the pure rule API, and
// can be cloned to probe the future without disturbing it.
type stepper interface {
	step(now int64, cost int) Decision
	clone() stepper
}

type ruleStepper[S any, R rule[S]] struct {
	r       R
	s       S
	started bool
}

func (p *ruleStepper[S, R]) step(now int64, cost int) Decision {
	if !p.started {
		p.s, p.started = freshPure[S](p.r, now), true
	}
	d, s, err := decidePure(p.r, p.s, now, cost)
	if err != nil {
		panic(err)
	}
	p.s = s
	return d
}

func (p *ruleStepper[S, R]) clone() stepper {
	c := *p
	if l, ok := any(p.s).(SlidingLogState); ok {
		l.buf = append([]int64(nil), l.buf...)
		c.s = any(l).(S)
	}
	return &c
}

func newStepper(tb testing.TB, cfg Config) stepper {
	tb.Helper()
	switch cfg.Mode {
	case TokenBucketMode:
		r, err := NewTokenBucket(cfg.Rate, cfg.Burst)
		must(tb, err)
		return &ruleStepper[TokenBucketState, TokenBucket]{r: r}
	case GCRAMode:
		r, err := NewGCRA(cfg.Rate, cfg.Burst)
		must(tb, err)
		return &ruleStepper[GCRAState, GCRA]{r: r}
	case FixedWindowMode:
		r, err := NewFixedWindow(cfg.Limit, cfg.Window)
		must(tb, err)
		return &ruleStepper[FixedWindowState, FixedWindow]{r: r}
	case SlidingCounterMode:
		r, err := NewSlidingCounter(cfg.Limit, cfg.Window)
		must(tb, err)
		return &ruleStepper[SlidingCounterState, SlidingCounter]{r: r}
	case SlidingLogMode:
		r, err := NewSlidingLog(cfg.Limit, cfg.Window)
		must(tb, err)
		return &ruleStepper[SlidingLogState, SlidingLog]{r: r}
	}
	tb.Fatalf("unknown mode %q", cfg.Mode)
	return nil
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// capacityOf is the largest admissible cost of cfg.
func capacityOf(cfg Config) int {
	if cfg.Mode == TokenBucketMode || cfg.Mode == GCRAMode {
		return cfg.Burst
	}
	return cfg.Limit
}

// xorshift is a tiny seeded PRNG for traces: deterministic and allocation-free.
type xorshift uint64

func (x *xorshift) next() uint64 {
	*x ^= *x << 13
	*x ^= *x >> 7
	*x ^= *x << 17
	return uint64(*x)
}

func (x *xorshift) intn(n int) int { return int(x.next() % uint64(n)) }

func contains(s, sub string) bool { return strings.Contains(s, sub) }
func itoa(i int) string           { return strconv.Itoa(i) }
