package limiter

import (
	"container/heap"
	"flag"
	"fmt"
	"math"
	"testing"
	"time"
)

// The accuracy study: a synthetic trace replayed through the sliding window
// counter and the exact sliding log side by side.
//
//	go test ./limiter -run TestAccuracy -accuracy -v
//
// By default a small trace runs, so the test can still fail.
var (
	accuracy         = flag.Bool("accuracy", false, "run the full accuracy study (TestAccuracy)")
	accuracyRequests = flag.Int("accuracy.requests", 10_000_000, "requests per profile in the full accuracy trace")
	accuracyKeys     = flag.Int("accuracy.keys", 20_000, "keys in the full accuracy trace")
	accuracySeed     = flag.Uint64("accuracy.seed", 1, "seed of the accuracy trace")
)

// profile shapes a trace: each key's base rate is limit/window × f, with f
// log-uniform in the range of a band drawn by share; Poisson arrivals
// alternate between a normal phase and a burst phase at burstMul × the base
// rate, both of exponential length. keys and requests, if set, fix the full
// study's size for the profile (the flags set the others'); the short run
// uses a twentieth of them.
type profile struct {
	name                  string
	bands                 []band
	burstMul              float64
	normalMean, burstMean float64 // seconds
	keys, requests        int
}

// band is a share of the keys whose f is log-uniform in [fLo, fHi].
type band struct{ share, fLo, fHi float64 }

var profiles = []profile{
	// Clients at most at half the limit on average; bursts of 10× for
	// ~10 s every ~5 min push some over it for a while.
	{name: "light", bands: []band{{1, 0.001, 0.5}}, burstMul: 10, normalMean: 300, burstMean: 10},
	// Clients up to the limit on average (traffic-weighted, most requests
	// come from clients close to it), bursts of 5× for ~10 s every ~5 min.
	{name: "at-limit", bands: []band{{1, 0.005, 1}}, burstMul: 5, normalMean: 300, burstMean: 10},
	// Clients up to 3× over the limit, 10× bursts for ~10 s every ~2 min:
	// the worst case for an estimate, most requests at the margin.
	{name: "hot", bands: []band{{1, 0.05, 3}}, burstMul: 10, normalMean: 120, burstMean: 10},
	// Cloudflare's published setting, scaled down: 270 000 sources over
	// 400 M requests of real traffic, most sources far below their
	// threshold, a small share near or above it. Here 200 000 keys and
	// 4 M requests (~9 min of traffic): 98.98 % of keys at 0.01–10 % of
	// the limit, 1 % at 30–100 %, 0.02 % (40 keys) at 1–3× (by traffic
	// about 69 %, 29 % and 2 %), with mild bursts (3× for ~5 s every
	// ~10 min).
	{name: "cloudflare-like", bands: []band{{0.9898, 1e-4, 0.1}, {0.01, 0.3, 1}, {0.0002, 1, 3}},
		burstMul: 3, normalMean: 600, burstMean: 5, keys: 200_000, requests: 4_000_000},
}

// f draws a key's rate factor.
func (p *profile) f(x *xorshift) float64 {
	b := p.bands[len(p.bands)-1]
	if len(p.bands) > 1 { // one band draws nothing: the first traces stay as published
		u := x.float()
		for _, c := range p.bands {
			if u < c.share {
				b = c
				break
			}
			u -= c.share
		}
	}
	return math.Exp(math.Log(b.fLo) + x.float()*math.Log(b.fHi/b.fLo))
}

// traceKey is one client's arrival process.
type traceKey struct {
	next     int64 // next arrival, ns since trace start
	rate     float64
	burst    bool
	phaseEnd int64
}

type arrivals struct {
	keys []traceKey
	idx  []int32 // heap of key indices ordered by next arrival
}

func (a *arrivals) Len() int           { return len(a.idx) }
func (a *arrivals) Less(i, j int) bool { return a.keys[a.idx[i]].next < a.keys[a.idx[j]].next }
func (a *arrivals) Swap(i, j int)      { a.idx[i], a.idx[j] = a.idx[j], a.idx[i] }
func (a *arrivals) Push(x any)         { a.idx = append(a.idx, x.(int32)) }
func (a *arrivals) Pop() any           { x := a.idx[len(a.idx)-1]; a.idx = a.idx[:len(a.idx)-1]; return x }

func (x *xorshift) float() float64           { return (float64(x.next()>>11) + 0.5) / (1 << 53) } // (0,1)
func (x *xorshift) exp(mean float64) float64 { return -math.Log(x.float()) * mean }

// advance draws k's next arrival after now, crossing phase switches.
func (k *traceKey) advance(p *profile, x *xorshift, now int64) {
	for {
		r := k.rate
		if k.burst {
			r *= p.burstMul
		}
		t := now + int64(x.exp(1/r)*1e9)
		if t < k.phaseEnd {
			k.next = t
			return
		}
		now = k.phaseEnd // memoryless: restart the draw at the switch
		k.burst = !k.burst
		mean := p.normalMean
		if k.burst {
			mean = p.burstMean
		}
		k.phaseEnd = now + int64(x.exp(mean)*1e9)
	}
}

type accuracyResult struct {
	profile                          string
	requests, keys                   int
	span                             time.Duration
	counterRejected, exactRejected   int
	shadowWrongAllow, shadowWrongRej int
	indepWrongAllow, indepWrongRej   int
}

func (r accuracyResult) pct(n int) float64 { return 100 * float64(n) / float64(r.requests) }

func (r accuracyResult) String() string {
	return fmt.Sprintf(`profile %s: %d requests, %d keys, %s of traffic; limit 100 per 1m
  rejected by sliding counter:        %8d (%.3f %%)
  rejected by exact sliding log:      %8d (%.3f %%)
  same history (log shadows the counter's admissions):
    wrongly allowed:                  %8d (%.4f %%)
    wrongly rejected:                 %8d (%.4f %%)
    total wrong:                      %8d (%.4f %%)
  independent replay (each keeps its own admissions):
    wrongly allowed:                  %8d (%.4f %%)
    wrongly rejected:                 %8d (%.4f %%)
    total wrong:                      %8d (%.4f %%)`,
		r.profile, r.requests, r.keys, r.span.Round(time.Second),
		r.counterRejected, r.pct(r.counterRejected), r.exactRejected, r.pct(r.exactRejected),
		r.shadowWrongAllow, r.pct(r.shadowWrongAllow), r.shadowWrongRej, r.pct(r.shadowWrongRej),
		r.shadowWrongAllow+r.shadowWrongRej, r.pct(r.shadowWrongAllow+r.shadowWrongRej),
		r.indepWrongAllow, r.pct(r.indepWrongAllow), r.indepWrongRej, r.pct(r.indepWrongRej),
		r.indepWrongAllow+r.indepWrongRej, r.pct(r.indepWrongAllow+r.indepWrongRej))
}

// runAccuracy generates the trace of profile p and replays it. Each request
// is decided three ways: by the sliding counter; by the exact rule over the
// counter's own admitted history (did the counter decide this request as the
// exact window would have, given the same past?); and by an independent
// exact sliding log with its own history.
func runAccuracy(p profile, requests, nkeys int, seed uint64) accuracyResult {
	const limit = 100
	window := int64(time.Minute)
	counter, _ := NewSlidingCounter(limit, time.Minute)
	exact, _ := NewSlidingLog(limit, time.Minute)
	x := xorshift(seed*0x9E3779B97F4A7C15 | 1)
	base := t0.UnixNano()

	a := &arrivals{keys: make([]traceKey, nkeys)}
	counters := make([]SlidingCounterState, nkeys)
	logs := make([]SlidingLogState, nkeys)
	shadow := make([][]int64, nkeys) // instants the counter admitted
	for i := range a.keys {
		k := &a.keys[i]
		k.rate = float64(limit) / 60 * p.f(&x)
		k.phaseEnd = int64(x.exp(p.normalMean) * 1e9)
		k.advance(&p, &x, 0)
		a.idx = append(a.idx, int32(i))
	}
	heap.Init(a)

	res := accuracyResult{profile: p.name, requests: requests, keys: nkeys}
	for range requests {
		i := a.idx[0]
		k := &a.keys[i]
		now := base + k.next

		c := counter.decide(&counters[i], now, 1)
		e := exact.decide(&logs[i], now, 1)

		sh := shadow[i]
		j := 0
		for j < len(sh) && sh[j] <= now-window {
			j++
		}
		sh = append(sh[:0], sh[j:]...)
		truth := len(sh)+1 <= limit
		if c.Allowed {
			sh = append(sh, now)
		}
		shadow[i] = sh

		if !c.Allowed {
			res.counterRejected++
		}
		if !e.Allowed {
			res.exactRejected++
		}
		switch {
		case c.Allowed && !truth:
			res.shadowWrongAllow++
		case !c.Allowed && truth:
			res.shadowWrongRej++
		}
		switch {
		case c.Allowed && !e.Allowed:
			res.indepWrongAllow++
		case !c.Allowed && e.Allowed:
			res.indepWrongRej++
		}
		res.span = time.Duration(k.next)
		k.advance(&p, &x, k.next)
		heap.Fix(a, 0)
	}
	return res
}

func TestAccuracy(t *testing.T) {
	for _, p := range profiles {
		requests, keys := 300_000, 1_000
		if *accuracy {
			requests, keys = *accuracyRequests, *accuracyKeys
		}
		if p.keys > 0 {
			requests, keys = p.requests, p.keys
			if !*accuracy {
				requests, keys = requests/20, keys/20
			}
		}
		res := runAccuracy(p, requests, keys, *accuracySeed)
		t.Log("\n" + res.String())
		// The trace must exercise the limit, and the counter's error must
		// stay near where this implementation measured it (see
		// BENCHMARKS.md): a regression in the estimate shows up here.
		if res.exactRejected == 0 {
			t.Errorf("%s: no request over the limit: the trace does not exercise it", p.name)
		}
		if wrong := res.pct(res.shadowWrongAllow + res.shadowWrongRej); p.name == "light" && wrong > 5 {
			t.Errorf("%s: sliding counter wrong on %.3f %% of requests, want < 5 %%", p.name, wrong)
		}
	}
}
