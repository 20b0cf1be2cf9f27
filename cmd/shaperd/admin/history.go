package admin

import (
	"context"
	"encoding/json"
	"maps"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shaperd/shaper/cmd/shaperd/admin/api"
	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/service"
)

// DefaultHistoryInterval is how often the status history samples the lanes.
const DefaultHistoryInterval = 2 * time.Second

// historySamples bounds each downstream's history: 300 samples are the last
// 10 minutes at the default interval.
const historySamples = 300

// History keeps the last historySamples samples of every downstream for
// the status page (GET /v1/history). A sampler goroutine, started by Start
// and owned by its caller, records a sample per interval; the server reads
// them. Create it with NewHistory; safe for concurrent use.
type History struct {
	every time.Duration
	mu    sync.Mutex
	lanes map[string]*laneHistory // guarded by mu
	// achieved, if not nil, exports each lane's achieved drain rate over
	// the last interval (shaper_drain_rate_achieved_per_second).
	achieved *prometheus.GaugeVec
}

// laneHistory is one downstream's ring of samples plus the counters of the
// previous observation, from which the per-second rates are computed.
type laneHistory struct {
	prevAt                      time.Time
	prevStarted, prevRej, prevD uint64
	prevOK, prevFail, prevRetry uint64  // delivered success, failed + dead_lettered, retries
	prevTries                   uint64  // tries answered
	prevTrySeconds              float64 // their total duration
	ring                        [historySamples]sample
	head, n                     int // ring[head] is the oldest of n samples
}

type sample struct {
	at                                time.Time
	depth, capacity, inflight         int
	rate, achieved, rejected, dropped float64 // per second
	succeeded, failed, retried        float64 // per second
	latency                           float64 // mean seconds of the tries answered since the last sample; 0 = none
	paused                            bool    // by the admin API or pushback
}

// NewHistory returns an empty history that samples every interval (0 or
// less: DefaultHistoryInterval). If achieved is not nil, each sample sets
// its downstream's series there (label downstream) to the achieved rate,
// and a downstream's series is deleted when it is no longer listed.
func NewHistory(every time.Duration, achieved *prometheus.GaugeVec) *History {
	if every <= 0 {
		every = DefaultHistoryInterval
	}
	return &History{every: every, lanes: map[string]*laneHistory{}, achieved: achieved}
}

// Sampler is the service that records lanes() every interval.
func (h *History) Sampler(lanes func() []shaper.LaneStatus) *service.Loop {
	return &service.Loop{Run: func(ctx context.Context) {
		tick := time.NewTicker(h.every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				h.record(now, lanes())
			}
		}
	}}
}

// record adds one sample per lane at now. A lane's first observation only
// sets the baseline for its rates; lanes no longer listed are forgotten, so
// the history is bounded by the config.
func (h *History) record(now time.Time, lanes []shaper.LaneStatus) {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := make(map[string]bool, len(lanes))
	for _, st := range lanes {
		seen[st.Name] = true
		rej, drop := sum(st.Rejected), sum(st.Dropped)
		ok, fail := st.Delivered[shaper.OutcomeSuccess], failures(st)
		started := startsOf(st)
		lh := h.lanes[st.Name]
		if lh == nil {
			h.lanes[st.Name] = &laneHistory{prevAt: now, prevStarted: started, prevRej: rej, prevD: drop,
				prevOK: ok, prevFail: fail, prevRetry: st.Retries, prevTries: st.Tries, prevTrySeconds: st.TrySeconds}
			h.setAchieved(st.Name, 0)
			continue
		}
		dt := now.Sub(lh.prevAt).Seconds()
		if dt <= 0 {
			continue
		}
		lh.push(sample{
			at: now, depth: st.Depth, capacity: st.Capacity, inflight: st.Inflight,
			rate:      st.Rate,
			achieved:  perSecond(lh.prevStarted, started, dt),
			rejected:  perSecond(lh.prevRej, rej, dt),
			dropped:   perSecond(lh.prevD, drop, dt),
			succeeded: perSecond(lh.prevOK, ok, dt),
			failed:    perSecond(lh.prevFail, fail, dt),
			retried:   perSecond(lh.prevRetry, st.Retries, dt),
			latency:   meanLatency(lh.prevTries, st.Tries, lh.prevTrySeconds, st.TrySeconds),
			paused:    st.Paused || st.PushbackUntil != nil,
		})
		lh.prevAt, lh.prevStarted, lh.prevRej, lh.prevD = now, started, rej, drop
		lh.prevOK, lh.prevFail, lh.prevRetry = ok, fail, st.Retries
		lh.prevTries, lh.prevTrySeconds = st.Tries, st.TrySeconds
		h.setAchieved(st.Name, lh.ring[(lh.head+lh.n-1)%len(lh.ring)].achieved)
	}
	for name := range h.lanes {
		if !seen[name] {
			delete(h.lanes, name)
			if h.achieved != nil {
				h.achieved.DeleteLabelValues(name)
			}
		}
	}
}

// startsOf is what st's rate counts: its calls, on a lane with a batch,
// else its tries started.
func startsOf(st shaper.LaneStatus) uint64 {
	if st.Batch != nil {
		return st.Batch.Calls
	}
	return st.Started
}

func (h *History) setAchieved(name string, v float64) {
	if h.achieved != nil {
		h.achieved.WithLabelValues(name).Set(v)
	}
}

func (lh *laneHistory) push(s sample) {
	if lh.n < len(lh.ring) {
		lh.ring[(lh.head+lh.n)%len(lh.ring)] = s
		lh.n++
		return
	}
	lh.ring[lh.head] = s
	lh.head = (lh.head + 1) % len(lh.ring)
}

// perSecond is the rate of a counter between two readings dt seconds apart.
// A counter that went down was reset (a lane removed and added again), as
// Prometheus' rate() assumes, so cur counts from zero.
func perSecond(prev, cur uint64, dt float64) float64 {
	d := cur
	if cur >= prev {
		d = cur - prev
	}
	return math.Round(float64(d)/dt*1000) / 1000
}

// failures is a lane's failed deliveries: failed plus dead-lettered, as
// shaper_delivered_total{outcome=~"failed|dead_lettered"}.
func failures(st shaper.LaneStatus) uint64 {
	return st.Delivered[shaper.OutcomeFailed] + st.Delivered[shaper.OutcomeDeadLettered]
}

func sum[K comparable](m map[K]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}

// HistoryResponse and DownstreamTrend are GET /v1/history's body, declared
// with the admin API's other bodies.
type (
	HistoryResponse = api.History
	DownstreamTrend = api.DownstreamTrend
)

// snapshot copies the history out for serving.
func (h *History) snapshot() HistoryResponse {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := HistoryResponse{
		IntervalSeconds: h.every.Seconds(), MaxSamples: historySamples,
		Downstreams: make([]DownstreamTrend, 0, len(h.lanes)),
	}
	for _, name := range slices.Sorted(maps.Keys(h.lanes)) {
		lh := h.lanes[name]
		tr := DownstreamTrend{
			Name: name, TimeUnixMs: make([]int64, lh.n), Depth: make([]int, lh.n),
			Capacity: make([]int, lh.n), Inflight: make([]int, lh.n), Rate: make([]float64, lh.n),
			AchievedRate: make([]float64, lh.n), RejectedRate: make([]float64, lh.n),
			DroppedRate: make([]float64, lh.n), Paused: make([]bool, lh.n),
			SuccessRate: make([]float64, lh.n), FailureRate: make([]float64, lh.n), RetryRate: make([]float64, lh.n),
			LatencySeconds: make([]float64, lh.n),
		}
		for i := range lh.n {
			s := lh.ring[(lh.head+i)%len(lh.ring)]
			tr.TimeUnixMs[i], tr.Depth[i], tr.Capacity[i], tr.Inflight[i] = s.at.UnixMilli(), s.depth, s.capacity, s.inflight
			tr.Rate[i], tr.AchievedRate[i], tr.RejectedRate[i], tr.DroppedRate[i] = s.rate, s.achieved, s.rejected, s.dropped
			tr.SuccessRate[i], tr.FailureRate[i], tr.RetryRate[i] = s.succeeded, s.failed, s.retried
			tr.LatencySeconds[i] = s.latency
			tr.Paused[i] = s.paused
		}
		out.Downstreams = append(out.Downstreams, tr)
	}
	return out
}

// serveHistory serves GET /v1/history, compact (up to 300 samples a
// downstream; writeJSON's indentation would double it).
func (h *handlers) serveHistory(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(h.History.snapshot()) // the client may have gone
}

// meanLatency is the mean duration of the tries answered between two
// samples: Δseconds ÷ Δtries, 0 when none was answered (or a counter went
// back: the lane was re-created).
func meanLatency(prevTries, tries uint64, prevSeconds, seconds float64) float64 {
	if tries <= prevTries || seconds < prevSeconds {
		return 0
	}
	return (seconds - prevSeconds) / float64(tries-prevTries)
}
