package shaper

import (
	"slices"
	"strings"
	"time"

	"github.com/shaperd/shaper/shaper/metrics"
	"github.com/shaperd/shaper/shaper/policy"
)

// LaneStatus is a snapshot of one downstream for the admin API
// (GET /v1/downstreams). Counters count since the lane was created.
type LaneStatus struct {
	Name string `json:"name"`
	// Rate is the configured drain rate in starts per second.
	Rate float64 `json:"rate"`
	// EffectiveRate is the rate starts are being made at now: Rate (or the
	// adaptive rate under rate_control adaptive), or 0 while paused (by the
	// admin API or by pushback) or held by the breaker.
	EffectiveRate float64 `json:"effective_rate"`
	Concurrency   int     `json:"concurrency"`
	// KeyConcurrency is the most tries of one admission key in flight at
	// once (queue.key_concurrency); 0 = no bound per key.
	KeyConcurrency int `json:"key_concurrency"`
	Depth          int `json:"depth"` // queued jobs, including retries waiting for backoff
	// Levels is Depth by priority level, most urgent first, without the
	// delayed jobs not yet due; absent with one level (queue.priorities 1)
	// or a queue that cannot tell.
	Levels []int `json:"levels,omitempty"`
	// Delayed is how many of Depth are delayed jobs whose instant has not
	// come (absent when the queue cannot tell).
	Delayed  *int `json:"delayed,omitempty"`
	Capacity int  `json:"capacity"`
	Inflight int  `json:"inflight"`
	Paused   bool `json:"paused"` // by the admin API
	// PausedUntil is when a timed pause by the admin API ends; nil for
	// none, or for a pause until resumed.
	PausedUntil *time.Time `json:"paused_until,omitempty"`
	// Maintenance is the maintenance window the lane is in, or else the
	// next one (within eight days); nil without one.
	Maintenance *MaintenanceWindow `json:"maintenance,omitempty"`
	// Override is what the admin API overrides of the configured rate,
	// concurrency and capacity (Rate, Concurrency and Capacity are the
	// effective values); nil for none.
	Override *Override `json:"override,omitempty"`
	// PushbackUntil is when a downstream pushback pause ends; nil if none.
	PushbackUntil *time.Time `json:"pushback_until,omitempty"`
	// Removing is true for a lane dropped from the config that is still
	// delivering what it holds (it takes no new jobs).
	Removing bool `json:"removing,omitempty"`
	// Breaker is the circuit breaker's state (closed without a breaker);
	// BreakerUntil is when an open breaker's probe is due, nil otherwise.
	Breaker      policy.BreakerState `json:"breaker"`
	BreakerUntil *time.Time          `json:"breaker_until,omitempty"`
	// StoreFull is true while the durable queue's store is out of space:
	// intake answers unavailable until it takes a job again.
	StoreFull bool `json:"store_full"`
	// Batch is the lane's batch (several jobs per call) and its calls so
	// far; nil for one job per call.
	Batch *BatchStatus `json:"batch,omitempty"`
	// AdvertisedQuota is the quota the downstream's rate-limit headers
	// advertised last (RateLimit-Policy / X-RateLimit-*); nil until one did.
	AdvertisedQuota *AdvertisedQuota `json:"advertised_quota,omitempty"`

	Received  uint64             `json:"received"`
	Accepted  uint64             `json:"accepted"`
	Rejected  map[Reason]uint64  `json:"rejected"`  // by reason
	Dropped   map[Reason]uint64  `json:"dropped"`   // by reason: expired, shutdown
	Started   uint64             `json:"started"`   // tries started, retries included
	Delivered map[Outcome]uint64 `json:"delivered"` // by outcome
	Retries   uint64             `json:"retries"`
	Pushbacks uint64             `json:"pushbacks"`
	// Tries counts the tries that were answered, and TrySeconds their
	// total duration (as shaper_delivery_duration_seconds' _count and
	// _sum): the mean latency over a span is ΔTrySeconds ÷ ΔTries.
	Tries      uint64  `json:"tries"`
	TrySeconds float64 `json:"try_seconds"`

	// AdmissionKeys is how many producer keys the lane's in-memory
	// admission limiter holds now (bounded by its key cap), and
	// AdmissionKeysEvicted how many live keys were evicted at that cap.
	// Absent without admission control or with a remote store.
	AdmissionKeys        *int    `json:"admission_keys,omitempty"`
	AdmissionKeysEvicted *uint64 `json:"admission_keys_evicted,omitempty"`
}

// BatchStatus is a lane's batch settings (Rate and Concurrency count
// calls) and its calls since it was created: Jobs ÷ Calls is the mean
// jobs per call.
type BatchStatus struct {
	MaxJobs       int     `json:"max_jobs"`
	MaxBytes      int64   `json:"max_bytes"`
	LingerSeconds float64 `json:"linger_seconds"`
	Encoding      string  `json:"encoding"`
	Calls         uint64  `json:"calls"` // calls started
	Jobs          uint64  `json:"jobs"`  // jobs they carried
}

// MaintenanceWindow is one occurrence of a lane's maintenance windows.
type MaintenanceWindow struct {
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Active bool      `json:"active"` // now is inside it
}

// Lanes returns a snapshot of every lane (including removed lanes still
// draining), sorted by name. Safe for concurrent use; does not block on I/O.
func (s *Shaper) Lanes() []LaneStatus {
	now := time.Now()
	lanes := s.allLanes()
	out := make([]LaneStatus, 0, len(lanes))
	for _, l := range lanes {
		out = append(out, l.status(now))
	}
	slices.SortFunc(out, func(a, b LaneStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (l *lane) status(now time.Time) LaneStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.policies.View(now)
	st := LaneStatus{
		Name: l.name, Rate: l.cfg.Rate, EffectiveRate: l.paceRate(), Concurrency: l.cfg.Concurrency,
		KeyConcurrency: l.cfg.KeyConcurrency,
		Depth:          l.q.Len(), Capacity: l.q.Cap(), Inflight: l.inflight, Paused: v.Paused,
		Removing: l.removed, StoreFull: l.noSpace,
		Received: l.c.received, Accepted: l.c.accepted, Started: l.c.started,
		Retries: l.c.retries, Pushbacks: l.c.pushbacks, Tries: l.c.tries, TrySeconds: l.c.trySeconds,
		Rejected: clone(l.c.rejected, rejectReasons), Dropped: clone(l.c.dropped, dropReasons),
		Delivered: clone(l.c.delivered, outcomes),
	}
	st.Delivered[OutcomeSuccess] = l.c.succeeded
	if b := l.cfg.Batch; b.On() {
		st.Batch = &BatchStatus{MaxJobs: b.MaxJobs, MaxBytes: b.MaxBytes, LingerSeconds: b.Linger.Seconds(), Encoding: b.Encoding,
			Calls: l.c.calls, Jobs: l.c.callJobs}
	}
	if n, delayed, ok := l.countsLocked(now, make([]int, metrics.MaxLevels)); ok {
		st.Delayed = &delayed
		if len(n) > 1 {
			st.Levels = n
		}
	}
	if t := v.PausedUntil; st.Paused && !t.IsZero() {
		st.PausedUntil = &t
	}
	if sp := v.Window; v.HasWindow {
		st.Maintenance = &MaintenanceWindow{Start: sp.Start, End: sp.End, Active: !now.Before(sp.Start)}
	}
	if !l.ovr.IsZero() {
		o := l.ovr
		st.Override = &o
	}
	if t := v.PushbackUntil; t.After(now) {
		st.PushbackUntil = &t
	}
	if l.adm != nil {
		if as, ok := l.adm.Stats(); ok {
			st.AdmissionKeys, st.AdmissionKeysEvicted = &as.Keys, &as.Evictions
		}
	}
	st.AdvertisedQuota, st.Breaker = v.Quota.Shown(), v.Breaker
	if t := v.ProbeAt; st.Breaker == policy.BreakerOpen {
		st.BreakerUntil = &t
	}
	if st.Paused || st.PushbackUntil != nil || st.Breaker != policy.BreakerClosed ||
		(st.Maintenance != nil && st.Maintenance.Active) {
		st.EffectiveRate = 0
	}
	return st
}

// clone copies m with every key of keys present.
func clone[K comparable](m map[K]uint64, keys []K) map[K]uint64 {
	out := make(map[K]uint64, len(keys))
	for _, k := range keys {
		out[k] = m[k]
	}
	return out
}

// live is the lane's metrics.LiveFunc: its counts read when scraped.
func (l *lane) live() metrics.Live {
	l.mu.Lock()
	defer l.mu.Unlock()
	return metrics.Live{Started: l.c.started, Succeeded: l.c.succeeded, Inflight: l.inflight, Depth: l.q.Len()}
}

// counts is the lane's metrics.CountsFunc: where its queued jobs wait.
func (l *lane) counts(now time.Time, levels []int) (n, delayed int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	got, delayed, ok := l.countsLocked(now, levels)
	return len(got), delayed, ok
}

// countsLocked fills levels with the jobs per level of the lane's queue
// and returns the part filled and the delayed jobs not yet due; ok is
// false when the queue cannot tell. Requires l.mu.
func (l *lane) countsLocked(now time.Time, levels []int) (filled []int, delayed int, ok bool) {
	if l.q.Counter == nil {
		return nil, 0, false
	}
	filled = levels[:min(l.q.Counter.Levels(), len(levels))]
	return filled, l.q.Counter.Counts(now, filled), true
}
