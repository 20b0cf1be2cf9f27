package shaper

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/shaperd/shaper/queue"
)

// Circuit breaker (LaneSettings.Breaker; SPEC "Learning the downstream's
// limit"). A breaker that opens holds the lane's jobs instead of failing
// them:
//
//   - closed: every try's answer is booked. Breaker.Failures consecutive
//     failed tries (breakerFailed: a 5xx, a timeout, a connection error)
//     open it.
//   - open: no job starts, so none uses an attempt; jobs stay queued and
//     their max wait still applies (an expired one is dropped when the lane
//     reaches it). Tries still in flight from before finish and are booked
//     for their jobs, not for the breaker.
//   - half_open: OpenFor after opening, exactly one job starts as the
//     probe (a real try: a failed probe counts against its job's
//     attempts). An answer that is not a failure closes the breaker and
//     the schedule restarts from that moment, without a burst; a failure
//     reopens it for twice as long as the last time, at most MaxOpenFor.
//
// The open period is folded into the schedule (gate), as a pushback pause
// is: the scheduler wakes the lane when the probe is due. Time is the
// scheduler's now and the delivery's end, never read here.
const (
	DefaultBreakerOpenFor    = 5 * time.Second
	DefaultBreakerMaxOpenFor = 5 * time.Minute
)

// BreakerSettings configure a lane's circuit breaker. The zero value turns
// it off.
type BreakerSettings struct {
	// Failures is how many consecutive failed tries open the breaker; 0 =
	// off.
	Failures int
	// OpenFor is how long the breaker stays open before its first probe;
	// 0 = DefaultBreakerOpenFor.
	OpenFor time.Duration
	// MaxOpenFor caps the doubling after each failed probe; 0 =
	// DefaultBreakerMaxOpenFor. At least OpenFor.
	MaxOpenFor time.Duration
}

// BreakerState is a breaker's state as GET /v1/downstreams shows it.
type BreakerState string

// Breaker states. A lane without a breaker is always closed.
const (
	BreakerClosed   BreakerState = "closed"
	BreakerOpen     BreakerState = "open"
	BreakerHalfOpen BreakerState = "half_open" // the probe is due or in flight
)

// breaker is a lane's circuit breaker; the zero value is closed and off.
// Guarded by lane.mu.
type breaker struct {
	set     BreakerSettings
	open    bool          // open or half-open
	fails   int           // consecutive failed tries while closed
	until   time.Time     // while open: when the probe may start
	openFor time.Duration // length of the current opening
	probe   *queue.Job    // the probe in flight; nil = none
}

// normalizeBreaker validates and defaults b.
func normalizeBreaker(b *BreakerSettings, bad func(string, ...any)) {
	if b.Failures < 0 || b.OpenFor < 0 || b.MaxOpenFor < 0 {
		bad("breaker: values must be >= 0, got %+v", *b)
	}
	if b.Failures <= 0 {
		return
	}
	b.OpenFor = cmp0(b.OpenFor, DefaultBreakerOpenFor)
	b.MaxOpenFor = cmp0(b.MaxOpenFor, max(DefaultBreakerMaxOpenFor, b.OpenFor))
	if b.MaxOpenFor < b.OpenFor {
		bad("breaker: max open for %s is below open for %s", b.MaxOpenFor, b.OpenFor)
	}
}

// configureBreaker applies new settings in place. A breaker turned off
// while open lets the lane start at its next wake (breakerRelease);
// otherwise the state is kept and the current opening is capped by the new
// MaxOpenFor. Requires l.mu.
func (l *lane) configureBreaker(set BreakerSettings) {
	b := &l.brk
	b.set = set
	switch {
	case set.Failures > 0:
		b.openFor = min(b.openFor, set.MaxOpenFor)
	case b.open: // a probe in flight is booked as a plain try
		b.until, b.probe = time.Time{}, nil
	default:
		*b = breaker{set: set}
	}
}

// breakerRelease closes, at now, a breaker that a reload turned off while
// it was open; the schedule restarts from now. Requires l.mu.
func (l *lane) breakerRelease(now time.Time) {
	if b := &l.brk; b.open && b.set.Failures <= 0 {
		*b = breaker{set: b.set}
		l.unblock(now)
		l.m.breakerOpen.Set(0)
		l.s.log.Info("breaker turned off by a reload; held jobs released", "downstream", l.name)
	}
}

// gate returns the earliest start at or after t the breaker allows: t when
// closed, the end of the open period when open.
func (b *breaker) gate(t time.Time) time.Time {
	if b.open {
		return later(t, b.until)
	}
	return t
}

// blocks reports whether the probe is in flight: no other job may start.
func (b *breaker) blocks() bool { return b.probe != nil }

// state is the breaker's state at now.
func (b *breaker) state(now time.Time) BreakerState {
	switch {
	case !b.open:
		return BreakerClosed
	case b.probe != nil || !now.Before(b.until):
		return BreakerHalfOpen
	}
	return BreakerOpen
}

// breakerFailed reports whether a try's answer is a failure to the
// breaker: anything but success, a pushback (429/503 with Retry-After) and
// a permanent failure (another 4xx) — those are answers of a live
// downstream. A 429 or 503 without Retry-After (*OverloadError) counts:
// it may be a proxy with no healthy backend.
func breakerFailed(err error) bool {
	var pb *PushbackError
	var perm *PermanentError
	return err != nil && !errors.As(err, &pb) && !errors.As(err, &perm)
}

// breakerStarted books a start: the first start of an open breaker
// (gate let it through, so its period is over) is the probe.
// Requires l.mu.
func (l *lane) breakerStarted(job *queue.Job) {
	if l.brk.open && l.brk.probe == nil {
		l.brk.probe = job
	}
}

// breakerDone books the answer to one try at now; tries cancelled at
// shutdown are not booked. Requires l.mu.
func (l *lane) breakerDone(job *queue.Job, err error, now time.Time) {
	b := &l.brk
	if b.set.Failures <= 0 || l.s.dctx.Err() != nil {
		return
	}
	failed := breakerFailed(err)
	switch {
	case b.open && b.probe == job && failed:
		b.probe = nil
		b.openFor = min(2*b.openFor, b.set.MaxOpenFor)
		b.until = now.Add(b.openFor)
		l.s.log.Warn("breaker probe failed; downstream stays held", "downstream", l.name,
			"job_id", job.ID, "probe_at", b.until, "error", err.Error())
	case b.open && b.probe == job:
		*b = breaker{set: b.set}
		l.unblock(now) // no catch-up for the time held
		l.m.breakerOpen.Set(0)
		l.s.log.Info("breaker probe succeeded; breaker closed", "downstream", l.name, "job_id", job.ID)
	case b.open: // a try started before the breaker opened
	case failed:
		if b.fails++; b.fails >= b.set.Failures {
			l.trip(now, err)
		}
	default:
		b.fails = 0
	}
}

// trip opens a closed breaker at now after a failed try. Requires l.mu.
func (l *lane) trip(now time.Time, err error) {
	b := &l.brk
	b.open, b.fails, b.openFor = true, 0, b.set.OpenFor
	b.until = now.Add(b.openFor)
	l.m.breakerOpen.Set(1)
	l.m.breakerTrips.Inc()
	l.s.log.Warn("downstream failing; breaker open, jobs held", "downstream", l.name,
		"failures", b.set.Failures, "probe_at", b.until, "error", fmt.Sprint(err))
}

// breakerMetrics are the breaker's collectors, by downstream.
type breakerMetrics struct {
	breakerOpen  *prometheus.GaugeVec
	breakerTrips *prometheus.CounterVec
}

func newBreakerMetrics(f promauto.Factory) breakerMetrics {
	ds := []string{"downstream"}
	return breakerMetrics{
		breakerOpen: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shaper_breaker_open",
			Help: "1 while a downstream's circuit breaker is open or half-open (jobs held), else 0.",
		}, ds),
		breakerTrips: f.NewCounterVec(prometheus.CounterOpts{
			Name: "shaper_breaker_trips_total",
			Help: "Times a downstream's circuit breaker opened after consecutive failed tries (reopenings after a failed probe not counted).",
		}, ds),
	}
}

// vecs are the collectors to delete a downstream's series from.
func (m breakerMetrics) breakerVecs() []*prometheus.MetricVec {
	return []*prometheus.MetricVec{m.breakerOpen.MetricVec, m.breakerTrips.MetricVec}
}

// breakerLane are one lane's pre-resolved breaker series.
type breakerLane struct {
	breakerOpen  prometheus.Gauge
	breakerTrips prometheus.Counter
}

func (m breakerMetrics) forLane(name string) breakerLane {
	bl := breakerLane{breakerOpen: m.breakerOpen.WithLabelValues(name), breakerTrips: m.breakerTrips.WithLabelValues(name)}
	bl.breakerOpen.Set(0)
	return bl
}
