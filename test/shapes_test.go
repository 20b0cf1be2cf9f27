package test

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Downstreams whose limit has a shape: each a real HTTP server
// that admits or refuses every request by its rule, sends the headers its
// kind of API sends, and records every answer. The capacity is what it
// really admits per second when it is sent enough.

// limitRule decides one request arriving at now (under the server's lock)
// and sets the answer's headers; ok = admitted.
type limitRule interface {
	admit(now time.Time, h http.Header) bool
}

// shapeDS is a shaped downstream.
type shapeDS struct {
	*httptest.Server
	name     string
	capacity func(el time.Duration) float64 // at el after the first request
	refuse   int                            // status of a refusal
	conc     int                            // > 0: a concurrency limit instead of rule
	hold     time.Duration                  // how long an admitted request takes

	mu        sync.Mutex
	rule      limitRule
	t0        time.Time // first request
	inflight  int
	answers   []shapeAnswer
	delivered map[string]int // payload → successes
}

type shapeAnswer struct {
	at time.Time
	ok bool
}

func newShapeDS(t *testing.T, name string, rule limitRule, capacity func(time.Duration) float64) *shapeDS {
	d := &shapeDS{name: name, rule: rule, capacity: capacity, refuse: http.StatusTooManyRequests,
		delivered: map[string]int{}}
	d.Server = httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(d.Close)
	return d
}

func (d *shapeDS) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	d.mu.Lock()
	now := time.Now()
	if d.t0.IsZero() {
		d.t0 = now
	}
	var ok bool
	if d.conc > 0 {
		if ok = d.inflight < d.conc; ok {
			d.inflight++
		}
	} else {
		ok = d.rule.admit(now, w.Header())
	}
	d.answers = append(d.answers, shapeAnswer{now, ok})
	if ok {
		d.delivered[string(body)]++
	}
	d.mu.Unlock()
	if !ok {
		w.WriteHeader(d.refuse)
		return
	}
	if d.hold > 0 {
		time.Sleep(d.hold)
		d.mu.Lock()
		d.inflight--
		d.mu.Unlock()
	}
	w.WriteHeader(http.StatusOK)
}

// between counts the answers in [a, b) and the capacity over it (tries).
func (d *shapeDS) between(a, b time.Time) (ok, refused int, capacity float64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, an := range d.answers {
		if an.at.Before(a) || !an.at.Before(b) {
			continue
		}
		if an.ok {
			ok++
		} else {
			refused++
		}
	}
	for t := a; t.Before(b); t = t.Add(10 * time.Millisecond) {
		capacity += d.capacity(t.Sub(d.t0)) * 0.01
	}
	return ok, refused, capacity
}

// capacityAt is the capacity at t (per second).
func (d *shapeDS) capacityAt(t time.Time) float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.capacity(t.Sub(d.t0))
}

// missing counts the payloads of 0..n-1 never delivered.
func (d *shapeDS) missing(prefix string, n int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	lost := 0
	for i := range n {
		if d.delivered[prefix+strconv.Itoa(i)] == 0 {
			lost++
		}
	}
	return lost
}

func constant(c float64) func(time.Duration) float64 { return func(time.Duration) float64 { return c } }

// gcra admits rate(el) per second with a burst of burst requests (a token
// bucket), and answers 429 without Retry-After beyond it.
type gcra struct {
	t0    time.Time
	rate  func(el time.Duration) float64
	burst float64
	tat   time.Time
}

func (g *gcra) admit(now time.Time, _ http.Header) bool {
	if g.t0.IsZero() {
		g.t0 = now
	}
	inc := time.Duration(float64(time.Second) / g.rate(now.Sub(g.t0)))
	g.tat = later(g.tat, now)
	if g.tat.Sub(now) > time.Duration(g.burst*float64(inc)) {
		return false
	}
	g.tat = g.tat.Add(inc)
	return true
}

// Header styles of a fixed window.
const (
	hdrNone       = iota
	hdrRetryAfter // Retry-After (whole seconds, rounded up) on a refusal
	hdrXRateLimit // X-RateLimit-Limit, -Remaining, -Reset (delta, rounded up) on every answer
	hdrIETF       // RateLimit-Policy and RateLimit (two policies) on every answer
)

// fixedWindow admits limit requests per window, the windows aligned to
// whole multiples of window in Unix time.
type fixedWindow struct {
	limit  int
	window time.Duration
	style  int
	idx    int64
	used   int
}

func (f *fixedWindow) admit(now time.Time, h http.Header) bool {
	if i := now.UnixNano() / int64(f.window); i != f.idx {
		f.idx, f.used = i, 0
	}
	ok := f.used < f.limit
	if ok {
		f.used++
	}
	end := time.Unix(0, (f.idx+1)*int64(f.window))
	reset := strconv.Itoa(int(math.Ceil(end.Sub(now).Seconds())))
	left := f.limit - f.used
	switch f.style {
	case hdrRetryAfter:
		if !ok {
			h.Set("Retry-After", reset)
		}
	case hdrXRateLimit:
		h.Set("X-RateLimit-Limit", strconv.Itoa(f.limit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(left))
		h.Set("X-RateLimit-Reset", reset)
	case hdrIETF:
		h.Set("RateLimit-Policy", fmt.Sprintf(`"day";q=10000000;w=86400, "default";q=%d;w=%d`,
			f.limit, int(f.window/time.Second)))
		h.Set("RateLimit", fmt.Sprintf(`"day";r=9999000;t=40000, "default";r=%d;t=%s`, left, reset))
	}
	return ok
}

// slidingLog admits limit successes in any sliding window.
type slidingLog struct {
	limit  int
	window time.Duration
	log    []time.Time
}

func (s *slidingLog) admit(now time.Time, _ http.Header) bool {
	cut := 0
	for cut < len(s.log) && !s.log[cut].After(now.Add(-s.window)) {
		cut++
	}
	s.log = s.log[cut:]
	if len(s.log) >= s.limit {
		return false
	}
	s.log = append(s.log, now)
	return true
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// limitShape is one row of the shape table: how to build its downstream,
// how long to run it and what to offer.
type limitShape struct {
	name  string
	build func(t *testing.T, run time.Duration) *shapeDS
	run   time.Duration // the measured span is from 2 s to run
	offer float64       // jobs per second published
	// align: the downstream's fixed window; the measured span and the
	// settle bins are whole windows of it (0 = any span, 1 s bins).
	align time.Duration
}

// shapes are the downstream shapes of docs/policies.md. Capacities are 20..40/s behind
// a 100/s ceiling.
var shapes = []limitShape{
	{"gcra 40/s burst 4", func(t *testing.T, _ time.Duration) *shapeDS {
		return newShapeDS(t, "gcra", &gcra{rate: constant(40), burst: 4}, constant(40))
	}, 12 * time.Second, 50, 0},
	{"fixed 1 s window, 40", func(t *testing.T, _ time.Duration) *shapeDS {
		return newShapeDS(t, "window1s", &fixedWindow{limit: 40, window: time.Second}, constant(40))
	}, 12 * time.Second, 50, time.Second},
	{"sliding 1 s log, 40", func(t *testing.T, _ time.Duration) *shapeDS {
		return newShapeDS(t, "log1s", &slidingLog{limit: 40, window: time.Second}, constant(40))
	}, 12 * time.Second, 50, 0},
	{"fixed 10 s window, 200, Retry-After", func(t *testing.T, _ time.Duration) *shapeDS {
		return newShapeDS(t, "window10s", &fixedWindow{limit: 200, window: 10 * time.Second, style: hdrRetryAfter}, constant(20))
	}, 30 * time.Second, 25, 10 * time.Second},
	{"4 in flight × 100 ms, 503 beyond", func(t *testing.T, _ time.Duration) *shapeDS {
		d := newShapeDS(t, "conc", nil, constant(40))
		d.conc, d.hold, d.refuse = 4, 100*time.Millisecond, http.StatusServiceUnavailable
		return d
	}, 12 * time.Second, 50, 0},
	{"X-RateLimit-*, 20 per 1 s", func(t *testing.T, _ time.Duration) *shapeDS {
		return newShapeDS(t, "xratelimit", &fixedWindow{limit: 20, window: time.Second, style: hdrXRateLimit}, constant(20))
	}, 12 * time.Second, 25, time.Second},
	{"IETF RateLimit, 50 per 2 s", func(t *testing.T, _ time.Duration) *shapeDS {
		return newShapeDS(t, "ietf", &fixedWindow{limit: 50, window: 2 * time.Second, style: hdrIETF}, constant(25))
	}, 12 * time.Second, 32, 2 * time.Second},
	{"gcra 40 → 20 → 40/s", func(t *testing.T, run time.Duration) *shapeDS {
		return newShapeDS(t, "halves", &gcra{rate: steps(run), burst: 4}, steps(run))
	}, 24 * time.Second, 50, 0},
}

// steps is a capacity of 40/s that halves at a third of run and doubles
// back at two thirds.
func steps(run time.Duration) func(time.Duration) float64 {
	return func(el time.Duration) float64 {
		if el >= run/3 && el < 2*run/3 {
			return 20
		}
		return 40
	}
}
