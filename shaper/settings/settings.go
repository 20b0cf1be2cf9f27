// Package settings is the shaper's configuration as config builds it: the
// whole (Shaper) and one downstream's (Lane), with its policies, retries,
// sink and dead-letter bounds, their defaults and validation (Normalize),
// and what an operator overrides of a lane at runtime (Override). Package
// shaper names these types by its own names (shaper.Settings,
// shaper.LaneSettings, ...).
package settings

import (
	"net/http"
	"time"

	"github.com/shaperd/shaper/limiter"
	"github.com/shaperd/shaper/shaper/admission"
	"github.com/shaperd/shaper/shaper/policy"
)

// Shaper is the whole shaper configuration (shaper.Settings), as built by
// config.ShaperSettings.
type Shaper struct {
	Lanes         []Lane
	ShutdownGrace time.Duration // in-flight deliveries get this long at shutdown; 0 = 10s
	// Tracing names the spans a lane exports when the shaper has a tracer
	// (shaper.Deps.Tracer).
	Tracing Tracing
}

// Tracing shapes the spans of a job's start (tracing.parent).
type Tracing struct {
	// Link starts a job's process span in a new trace linked to the
	// producer's span; false makes it a child of the producer's span.
	Link bool
	// SubjectPrefix is the intake's subject prefix (ingress.subject_prefix):
	// a span names the job's subject, <prefix>.<downstream>.
	SubjectPrefix string
}

// Lane configures one downstream (shaper.LaneSettings).
type Lane struct {
	Name        string
	Rate        float64         // starts per second, > 0
	Concurrency int             // max deliveries in flight, >= 1; 0 = 1
	Capacity    int             // queue bound, >= 1
	MaxWait     time.Duration   // max time from acceptance to start; 0 = unbounded
	Admission   *limiter.Config // nil = no admission control
	Retry       Retry
	Sink        Sink
	DeadLetter  string // subject; "" = none
	// DeadLetters bound the store the daemon keeps dead letters in; the
	// shaper only carries them.
	DeadLetters DeadLetterLimits
	// Durable asks the shaper's Deps.Queues for a durable queue (queue.backend
	// jetstream); false = the in-memory queue.
	Durable bool
	// MaxBytes bounds the payload bytes the queue holds (queue.max_bytes);
	// 0 = no byte bound. A durable queue's store enforces it itself.
	MaxBytes int64
	// AdmissionStore says where Admission's per-key state lives; the zero
	// value is in memory.
	AdmissionStore admission.Store
	// Breaker is the lane's circuit breaker; the zero value is off.
	Breaker policy.BreakerSettings
	// Maintenance are the lane's recurring maintenance windows: no start
	// inside one (intake goes on). nil = none.
	Maintenance []policy.Window
	// Placement places a durable queue's stream (queue.placement); nil:
	// where the server places it.
	Placement *Placement
	// Outcomes are the lane's job records, events and results; the zero
	// value keeps none.
	Outcomes Outcomes
	// Batch makes one start one call carrying several jobs; the zero
	// value sends one job per call.
	Batch Batch

	Policies // the zero value turns every one off
}

// Outcomes configures what a lane keeps and tells of each job's outcome
// (downstreams.X.outcomes).
type Outcomes struct {
	// Keep is how long a finished job's record is kept after it ends; 0 =
	// no records (and no results).
	Keep time.Duration
	// ResultBytes is how much of the downstream's answer body a record
	// keeps and an outcome carries (0: none of the body).
	ResultBytes int
	// Events: publish every change of state.
	Events bool
	// MaxRecords bounds an in-memory store's records (oldest finished
	// first); 0 = 100 000.
	MaxRecords int
}

// On reports whether o keeps records.
func (o Outcomes) On() bool { return o.Keep > 0 }

// Placement is where a durable queue's stream lives in a super-cluster:
// in cluster Cluster, on servers with every tag of Tags.
type Placement struct {
	Cluster string
	Tags    []string
}

// Batch configures a lane whose downstream takes several jobs in one call
// (downstreams.X.batch): rate and concurrency count calls; capacity and
// admission count jobs.
type Batch struct {
	// MaxJobs is the most jobs in one call, a job's cost counting (2..
	// MaxBatchJobs); 0 = no batches.
	MaxJobs int
	// MaxBytes bounds the payload bytes of one call; a job larger than it
	// goes alone. 0 = DefaultBatchBytes.
	MaxBytes int64
	// Linger is how long a call that could carry more waits for more
	// jobs (0..MaxBatchLinger), never past a job's deadline.
	Linger time.Duration
	// Encoding is the call's body, one of BatchEncodings (package
	// shaper/batch encodes them); "" = json_array.
	Encoding string
}

// On reports whether b sends several jobs per call.
func (b Batch) On() bool { return b.MaxJobs > 0 }

// PerCall is the most jobs one start carries: MaxJobs, or 1.
func (b Batch) PerCall() int { return max(b.MaxJobs, 1) }

// Bounds and defaults of Batch.
const (
	MaxBatchJobs      = 10000
	DefaultBatchBytes = 1 << 20
	MaxBatchLinger    = 10 * time.Second
)

// BatchEncodings are the bodies a call may have (Batch.Encoding).
var BatchEncodings = []string{"json_array", "ndjson", "multipart"}

// Policies are a lane's policies beyond a plain leaky bucket: job cost,
// deadline-aware admission, shadow mode, adaptive rate, fairness and
// several admission limits. The zero value turns each one off.
type Policies struct {
	// MaxCost is the highest Job.Cost accepted (queue.max_cost); 0 = 1. A
	// job of cost N takes N slots of capacity, N admission tokens and N
	// intervals of drain time.
	MaxCost int
	// RejectWouldExpire rejects at once, with shaper.ReasonWouldExpire, a job whose
	// predicted start (queued cost ahead of it / rate) is past its max wait.
	RejectWouldExpire bool
	// Shadow makes the lane count what its policies would reject (admission,
	// would_expire, the per-key share) in shaper_shadow_rejections_total
	// and accept the job anyway. The queue's capacity is always enforced.
	Shadow bool
	// AdmissionShadow is Shadow for the admission rule alone.
	AdmissionShadow bool
	// Adaptive lowers the drain rate below Rate when the downstream answers
	// 429/503 and raises it back after a run of successes (AIMD).
	Adaptive bool
	// Fairness gives each admission key its own sub-queue, served by
	// deficit round robin (memory queue only).
	Fairness bool
	// KeyCapacity bounds the cost one key may hold queued under Fairness;
	// 0 = Capacity.
	KeyCapacity int
	// Weights are per-key DRR weights under Fairness (absent = 1), by exact
	// key. Not modified by the shaper.
	Weights map[string]int
	// Priorities is the number of priority levels (queue.priorities,
	// 1..MaxPriorities; 0 = 1, off): a job's Shaper-Priority P, 0 ≤ P <
	// Priorities, 0 the most urgent; a job without one is in the least
	// urgent level. The levels share Capacity. Memory queue only, for now.
	Priorities int
	// MaxDelay is how far ahead of its arrival a delayed job
	// (Job.NotBefore) may be (queue.max_delay); 0 = DefaultMaxDelay. A
	// durable queue refuses delayed jobs, for now.
	MaxDelay time.Duration
	// KeyConcurrency is the most tries of one admission key (Job.Key) in
	// flight at once (queue.key_concurrency), retries included; 0 = no
	// bound per key, else 1..Concurrency. A job whose key is at it waits,
	// keeping its place, while jobs of other keys start.
	KeyConcurrency int
	// Limits makes the admission rule several limits at once (10/s and
	// 10000/day): a job is admitted only if every one admits, and the
	// charges of those that admitted are refunded when another rejects.
	// Set it instead of Admission (both set is an error); the admission
	// state must be in memory (AdmissionStore zero). Not modified by the
	// shaper.
	Limits []limiter.Config
}

// DeadLetterLimits bound a lane's stored dead letters: past either the
// oldest are discarded. Zero fields are no bound.
type DeadLetterLimits struct {
	MaxAge   time.Duration
	MaxCount int
}

// Retry bounds retries of failed deliveries.
type Retry struct {
	MaxAttempts    int           // total tries including the first, >= 1; 0 = 5
	InitialBackoff time.Duration // backoff after the first failure; 0 = 1s
	MaxBackoff     time.Duration // cap of the doubling backoff; 0 = 1m
}

// Sink says where a lane delivers. Exactly one of HTTP and NATS is set.
type Sink struct {
	HTTP *HTTPSink
	NATS *NATSSink
}

// HTTPSink configures an HTTP sink.
type HTTPSink struct {
	URL     string
	Method  string
	Timeout time.Duration // per try; 0 = 10s
	Headers http.Header

	// MaxIdleConnsPerHost bounds the idle keep-alive connections the sink
	// keeps; 0 = 32. sink.For raises 0 to the lane's concurrency when larger.
	MaxIdleConnsPerHost int

	// Results: keep each answer (status, headers, size and the first
	// ResultBytes of the body) in the try's Feedback. sink.For sets it
	// when the lane keeps records (Lane.Outcomes).
	Results bool
	// ResultBytes is how much of an answer's body Results keeps, 0 to
	// 1 MiB (0: none of the body).
	ResultBytes int
}

// NATSSink configures a NATS sink (built by the daemon).
type NATSSink struct {
	Subject string
	Request bool
	Timeout time.Duration

	// Results: keep a request sink's reply (headers, size and the first
	// ResultBytes of its payload) in the try's Feedback. sink.For sets it
	// when the lane keeps records (Lane.Outcomes).
	Results bool
	// ResultBytes is how much of a reply's payload Results keeps, 0 to
	// 1 MiB (0: none of it).
	ResultBytes int
}
