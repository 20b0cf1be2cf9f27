package config

import "time"

// Config is the whole daemon configuration. Field tags are the file keys
// (mapstructure tags, lower case). Sizes are bytes, rates are per second,
// after parsing. The zero value is not valid; start from Defaults or Load.
// A Config is a plain value: copying it shares the Downstreams map, so treat
// a loaded Config as read-only.
type Config struct {
	NATS          NATS                  `mapstructure:"nats"`
	Admin         Admin                 `mapstructure:"admin"`
	Ingress       Ingress               `mapstructure:"ingress"`
	ShutdownGrace time.Duration         `mapstructure:"shutdown_grace"`
	Tracing       Tracing               `mapstructure:"tracing"`
	Downstreams   map[string]Downstream `mapstructure:"downstreams"`
}

// Tracing shapes the spans shaperd exports when the OpenTelemetry
// environment turns tracing on (OTEL_EXPORTER_OTLP_ENDPOINT, ...). A
// change needs a restart.
type Tracing struct {
	// Parent is what a job's process span hangs from: producer (a child
	// of the producer's span, the default) or link (a new trace linked to
	// it).
	Parent string `mapstructure:"parent"`
}

// Values of tracing.parent.
const (
	TraceParentProducer = "producer"
	TraceParentLink     = "link"
)

// NATS says how to reach NATS; an empty URL starts an embedded server.
type NATS struct {
	URL      string   `mapstructure:"url"`
	Embedded Embedded `mapstructure:"embedded"`
	Creds    string   `mapstructure:"creds"`
	NKey     string   `mapstructure:"nkey"` // path to an nkey seed file
	User     string   `mapstructure:"user"`
	Password string   `mapstructure:"password"`
	Token    string   `mapstructure:"token"`
	TLS      TLS      `mapstructure:"tls"`
	// JetStream configures the durable queue backend (queue.backend:
	// jetstream). Like every nats.* key, a change needs a restart.
	JetStream JetStream `mapstructure:"jetstream"`
}

// JetStream configures the streams and consumers of durable queues: one
// stream <stream_prefix>_<downstream> on subject <subject_prefix>.<downstream>.
type JetStream struct {
	StreamPrefix  string        `mapstructure:"stream_prefix"`
	SubjectPrefix string        `mapstructure:"subject_prefix"`
	Replicas      int           `mapstructure:"replicas"`
	Storage       string        `mapstructure:"storage"` // file | memory
	AckWait       time.Duration `mapstructure:"ack_wait"`
	PinnedTTL     time.Duration `mapstructure:"pinned_ttl"`
	// AdmissionBucket is the KV bucket of admission.store nats;
	// AdmissionTimeout bounds one admission decision's KV round trips.
	AdmissionBucket  string        `mapstructure:"admission_bucket"`
	AdmissionTimeout time.Duration `mapstructure:"admission_timeout"`
	// RatesBucket is the KV bucket where adaptive downstreams keep their
	// learned rate (created on first use).
	RatesBucket string `mapstructure:"rates_bucket"`
}

// Embedded configures the in-process NATS server.
type Embedded struct {
	Listen   string `mapstructure:"listen"`
	StoreDir string `mapstructure:"store_dir"`
	// MaxStore is the server's JetStream file store limit; 0 = the
	// server's own (a share of the disk).
	MaxStore ByteSize `mapstructure:"max_store"`
	// Sync is how the store reaches the disk: "always" (fsync every
	// write), an interval, or "" for the server's own 2m (sync.go).
	Sync string `mapstructure:"sync"`
}

// TLS holds client TLS files (all optional).
type TLS struct {
	CA   string `mapstructure:"ca"`
	Cert string `mapstructure:"cert"`
	Key  string `mapstructure:"key"`
}

// Admin configures the admin HTTP listener. Every admin key needs a
// restart to change.
type Admin struct {
	Listen    string         `mapstructure:"listen"`
	BasicAuth AdminBasicAuth `mapstructure:"basic_auth"`
	TLS       AdminTLS       `mapstructure:"tls"`
}

// AdminBasicAuth protects every admin route but /healthz and /readyz with
// HTTP basic auth. Both fields or neither; the zero value is no auth.
type AdminBasicAuth struct {
	Username string `mapstructure:"username"`
	// PasswordHash is a bcrypt hash ($2a$, $2b$ or $2y$), e.g. from
	// `htpasswd -nbBC 10 USER PASSWORD`. Never printed.
	PasswordHash string `mapstructure:"password_hash"`
}

// AdminTLS makes the admin listener serve HTTPS. Both files or neither; the
// zero value is plain HTTP.
type AdminTLS struct {
	CertFile string `mapstructure:"cert_file"` // PEM certificate (chain)
	KeyFile  string `mapstructure:"key_file"`  // PEM private key
}

// Ingress configures job intake.
type Ingress struct {
	SubjectPrefix string        `mapstructure:"subject_prefix"`
	QueueGroup    string        `mapstructure:"queue_group"`
	KeyHeader     string        `mapstructure:"key_header"`
	MaxPayload    ByteSize      `mapstructure:"max_payload"`
	DedupeWindow  time.Duration `mapstructure:"dedupe_window"`
	// StatusPrefix is where jobs' status is asked:
	// <status_prefix>.<downstream>.<job_id>. A change needs a restart.
	StatusPrefix string `mapstructure:"status_prefix"`
	// EventsPrefix is where jobs' changes of state are published (and, on
	// jetstream, stored): <events_prefix>.<downstream>.<state>. A change
	// needs a restart.
	EventsPrefix string `mapstructure:"events_prefix"`
	// Bulk is bulk intake: many jobs in one request (bulk.go).
	Bulk Bulk `mapstructure:"bulk"`
}

// Downstream configures one protected backend.
type Downstream struct {
	Rate        Rate       `mapstructure:"rate"`
	Concurrency int        `mapstructure:"concurrency"`
	Queue       Queue      `mapstructure:"queue"`
	Admission   *Admission `mapstructure:"admission"`
	Sink        Sink       `mapstructure:"sink"`
	Retry       Retry      `mapstructure:"retry"`
	// DeadLetter is the subject dead letters go to; Load sets it to
	// shaper.dead.<name> when unset (DeadLetterSubject).
	DeadLetter string `mapstructure:"dead_letter"`
	// DeadLetters bound the store that keeps them (reloadable).
	DeadLetters DeadLetters `mapstructure:"dead_letters"`
	// RateControl is fixed (drain at rate) or adaptive (rate is a ceiling;
	// 429/503 from the downstream lower the effective rate, AIMD).
	RateControl string `mapstructure:"rate_control"`
	// Shadow counts what this downstream's policies would reject
	// (shaper_shadow_rejections_total) but rejects nothing of it.
	Shadow bool `mapstructure:"shadow"`
	// Breaker holds the downstream's jobs while it keeps failing.
	Breaker Breaker `mapstructure:"breaker"`
	// Maintenance are recurring windows with no starts (maintenance.go).
	Maintenance Maintenance `mapstructure:"maintenance"`
	// Outcomes say what is kept and told of each job's outcome: records,
	// results and events (outcomes.go; reloadable).
	Outcomes Outcomes `mapstructure:"outcomes"`
	// Batch makes one start one call carrying several jobs (batch.go);
	// nil: one job per call.
	Batch *Batch `mapstructure:"batch"`
}

// Breaker configures a downstream's circuit breaker: Failures consecutive
// failed tries open it (no starts, jobs held); a probe after OpenFor,
// doubling up to MaxOpenFor while probes fail. On by default (see
// DefaultDownstream); Failures 0 turns it off.
type Breaker struct {
	Failures   int           `mapstructure:"failures"`
	OpenFor    time.Duration `mapstructure:"open_for"`
	MaxOpenFor time.Duration `mapstructure:"max_open_for"`
}

// Queue configures a downstream's bounded queue.
type Queue struct {
	Capacity int           `mapstructure:"capacity"`
	Backend  string        `mapstructure:"backend"`  // jetstream | memory
	MaxWait  time.Duration `mapstructure:"max_wait"` // 0 = no limit
	// MaxCost bounds the Shaper-Cost header: a job of cost N takes N slots
	// of capacity, N admission tokens and N intervals of drain time.
	MaxCost int `mapstructure:"max_cost"`
	// RejectWouldExpire rejects at once (would_expire) a job whose
	// predicted start is past its max wait.
	RejectWouldExpire bool `mapstructure:"reject_would_expire"`
	// Fairness is none (one FIFO) or key (a sub-queue per admission key,
	// drained by deficit round robin; on jetstream each key's jobs are on a
	// subject of their own).
	Fairness string `mapstructure:"fairness"`
	// KeyCapacity bounds the cost one key may hold under fairness key (on
	// jetstream the jobs: the server bounds each key's subject); 0 =
	// capacity.
	KeyCapacity int `mapstructure:"key_capacity"`
	// Weights are per-key round-robin weights under fairness key.
	Weights KeyWeights `mapstructure:"weights"`
	// MaxBytes bounds the payload bytes the queue holds (on jetstream, the
	// stream's bytes); 0 = no byte bound.
	MaxBytes ByteSize `mapstructure:"max_bytes"`
	// Priorities is the number of priority levels (Shaper-Priority
	// 0..Priorities−1, 0 the most urgent); 1 = off.
	Priorities int `mapstructure:"priorities"`
	// MaxDelay is how far ahead a delayed job (Shaper-Delay,
	// Shaper-Not-Before) may be.
	MaxDelay time.Duration `mapstructure:"max_delay"`
	// KeyConcurrency is the most deliveries of one admission key in
	// flight at once (retries included); 0 = off, else 1..concurrency.
	// A job whose key is at it waits, keeping its place, while jobs of
	// other keys start.
	KeyConcurrency int `mapstructure:"key_concurrency"`
	// Placement puts a jetstream downstream's stream in one cluster of a
	// super-cluster, its home region (placement.go); nil: where the
	// server places it.
	Placement *Placement `mapstructure:"placement"`
}

// Admission configures per-key admission control: one limit (Mode, Rate,
// Burst, Limit, Window) or several at once (Limits), exactly one of the two.
// token_bucket and gcra use Rate and Burst; fixed_window, sliding_log and
// sliding_counter use Limit and Window. Setting a field the mode does not
// use is an error.
type Admission struct {
	Mode   string        `mapstructure:"mode"`
	Rate   Rate          `mapstructure:"rate"`
	Burst  int           `mapstructure:"burst"`
	Limit  int           `mapstructure:"limit"`
	Window time.Duration `mapstructure:"window"`
	// Limits are 1..MaxLimits limits that must all admit a job (10/s and
	// 10000/day); a rejection refunds the others. File only: list items
	// have no env vars. nil = the single-limit form above.
	Limits []Limit `mapstructure:"limits"`
	// Shadow counts this rule's rejections but admits the jobs.
	Shadow bool `mapstructure:"shadow"`
	// Store is where the per-key state lives: memory (this process) or
	// nats (a JetStream KV bucket shared by every instance).
	Store string `mapstructure:"store"`
	// FailClosed rejects (unavailable, with Retry-After) what the nats
	// store cannot decide; false admits it (fail open).
	FailClosed bool `mapstructure:"fail_closed"`
	// Approximate decides from a local copy reconciled with the nats store
	// in the background (token_bucket and gcra).
	Approximate bool `mapstructure:"approximate"`
	// MaxKeys caps the producer keys an in-memory limiter holds (memory
	// is about 40 bytes a key); at the cap the stalest key is evicted.
	// 0 = the limiter's default, 1 048 576.
	MaxKeys int `mapstructure:"max_keys"`
}

// Limit is one limit of Admission.Limits, with the fields and rules of the
// single-limit form.
type Limit struct {
	Mode   string        `mapstructure:"mode"`
	Rate   Rate          `mapstructure:"rate"`
	Burst  int           `mapstructure:"burst"`
	Limit  int           `mapstructure:"limit"`
	Window time.Duration `mapstructure:"window"`
}

// Sink configures where a downstream's jobs go; exactly one is set.
type Sink struct {
	HTTP *HTTPSink `mapstructure:"http"`
	NATS *NATSSink `mapstructure:"nats"`
}

// HTTPSink is an HTTP endpoint.
type HTTPSink struct {
	URL     string            `mapstructure:"url"`
	Method  string            `mapstructure:"method"`
	Timeout time.Duration     `mapstructure:"timeout"`
	Headers map[string]string `mapstructure:"headers"`
}

// NATSSink is a NATS subject.
type NATSSink struct {
	Subject string        `mapstructure:"subject"`
	Request bool          `mapstructure:"request"`
	Timeout time.Duration `mapstructure:"timeout"`
}

// DeadLetters bound a downstream's dead-letter store (a JetStream stream):
// past MaxAge or MaxCount the oldest are discarded and counted.
type DeadLetters struct {
	MaxAge   time.Duration `mapstructure:"max_age"`
	MaxCount int           `mapstructure:"max_count"`
}

// Outcomes configure a downstream's job records, results and events: a
// record of each accepted job from acceptance until Keep after it ends,
// holding up to ResultBytes of the downstream's answer, and with Events
// every change of state published. Keep 0 keeps no records.
type Outcomes struct {
	Keep        time.Duration `mapstructure:"keep"`
	ResultBytes ByteSize      `mapstructure:"result_bytes"`
	Events      bool          `mapstructure:"events"`
	// MaxRecords bounds the records a memory queue's downstream keeps in
	// this instance (oldest finished first); unused on jetstream, where the
	// store's sharing bounds them (StorePlan.Outcomes).
	MaxRecords int `mapstructure:"max_records"`
}

// Retry configures delivery retries.
type Retry struct {
	MaxAttempts    int           `mapstructure:"max_attempts"`
	InitialBackoff time.Duration `mapstructure:"initial_backoff"`
	MaxBackoff     time.Duration `mapstructure:"max_backoff"`
}
