package config

import (
	"github.com/shaperd/shaper/limiter/natskv"
	"github.com/shaperd/shaper/queue/jetstream"
	"github.com/shaperd/shaper/shaper/policy"
	"github.com/shaperd/shaper/shaper/producer"
	"github.com/shaperd/shaper/shaper/settings"
	"github.com/shaperd/shaper/shaper/sink"
)

// Defaults returns the configuration used when no file is given: an
// embedded NATS server, the admin API on loopback and no downstreams.
// Where a package has a default of its own (the durable queue's stream
// settings, the admission store's bucket, the shaper's and the sinks'
// limits) the value is that package's constant, so each is written once.
func Defaults() Config {
	return Config{
		NATS: NATS{
			Embedded: Embedded{Listen: "127.0.0.1:4222", StoreDir: "./data/nats"},
			JetStream: JetStream{
				StreamPrefix: jetstream.DefaultStreamPrefix, SubjectPrefix: jetstream.DefaultSubjectPrefix,
				Replicas: 1, Storage: "file",
				AckWait: jetstream.DefaultAckWait, PinnedTTL: jetstream.DefaultPinnedTTL,
				AdmissionBucket: natskv.DefaultBucket, AdmissionTimeout: natskv.DefaultTimeout,
				RatesBucket: "SHAPER_RATES",
			},
		},
		Admin: Admin{Listen: "127.0.0.1:9090"},
		Ingress: Ingress{
			SubjectPrefix: producer.DefaultSubjectPrefix,
			QueueGroup:    "shaper",
			KeyHeader:     producer.DefaultKeyHeader,
			MaxPayload:    1 << 20,
			DedupeWindow:  jetstream.DefaultDedupeWindow,
			StatusPrefix:  DefaultStatusPrefix,
			EventsPrefix:  DefaultEventsPrefix,
			Bulk:          Bulk{SubjectPrefix: DefaultBulkPrefix, MaxJobs: DefaultBulkMaxJobs, MaxBytes: DefaultBulkMaxBytes},
		},
		ShutdownGrace: settings.DefaultShutdownGrace,
		Tracing:       Tracing{Parent: TraceParentProducer},
	}
}

// DefaultDownstream returns the defaults every downstream starts from:
// concurrency 1, queue.backend jetstream, no max_wait (0 = jobs wait as long
// as the queue holds them), one priority level, queue.max_delay 24h, retry {5, 1s, 1m}, the breaker on {5, 5s, 5m}
// (failures 0 turns it off), dead letters kept for 168h, at most 10000,
// outcomes {keep 24h, result_bytes 64KiB, events false, max_records 100000}.
// Rate, queue.capacity and the sink have no default; admission is off
// unless configured; dead_letter defaults to shaper.dead.<name>
// (DeadLetterSubject).
func DefaultDownstream() Downstream {
	return Downstream{
		Concurrency: settings.DefaultConcurrency,
		Queue: Queue{Backend: BackendJetStream, MaxCost: 1, Fairness: FairnessNone, Priorities: 1,
			MaxDelay: settings.DefaultMaxDelay},
		Retry: Retry{MaxAttempts: settings.DefaultMaxAttempts, InitialBackoff: settings.DefaultInitialBackoff,
			MaxBackoff: settings.DefaultMaxBackoff},
		DeadLetters: DeadLetters{MaxAge: settings.DefaultDeadLetterMaxAge, MaxCount: settings.DefaultDeadLetterMaxCount},
		RateControl: RateFixed,
		Breaker: Breaker{Failures: policy.DefaultBreakerFailures, OpenFor: policy.DefaultBreakerOpenFor,
			MaxOpenFor: policy.DefaultBreakerMaxOpenFor},
		Outcomes: Outcomes{Keep: DefaultOutcomesKeep, ResultBytes: DefaultResultBytes, MaxRecords: DefaultMaxRecords},
	}
}

// DeadLetterPrefix is where a downstream's dead letters go when its
// dead_letter is unset: DeadLetterPrefix.<name>.
const DeadLetterPrefix = "shaper.dead"

// DeadLetterSubject is downstream name's dead-letter subject: d.DeadLetter,
// or shaper.dead.<name> when it is empty (a Config built in code rather
// than by Load).
func (d Downstream) DeadLetterSubject(name string) string {
	if d.DeadLetter != "" {
		return d.DeadLetter
	}
	return DeadLetterPrefix + "." + name
}

// Rate control modes (downstreams.NAME.rate_control).
const (
	RateFixed    = "fixed"
	RateAdaptive = "adaptive"
)

// Fairness modes (downstreams.NAME.queue.fairness).
const (
	FairnessNone = "none"
	FairnessKey  = "key"
)

// Queue backends.
const (
	BackendJetStream = "jetstream" // durable; the default
	BackendMemory    = "memory"
)

// downstreamTemplate is DefaultDownstream with every optional section
// present, holding that section's defaults; the loader takes a section's
// defaults from it only when the section is configured.
func downstreamTemplate() Downstream {
	d := DefaultDownstream()
	d.Admission = &Admission{}
	d.Sink.HTTP = &HTTPSink{Method: sink.DefaultHTTPMethod, Timeout: sink.DefaultTimeout}
	d.Sink.NATS = &NATSSink{Timeout: sink.DefaultTimeout}
	d.Batch = &Batch{MaxBytes: DefaultBatchBytes, Encoding: DefaultBatchEncoding}
	d.Queue.Placement = &Placement{}
	return d
}

// withDeadLetterSubjects sets every unset dead_letter to its default, so
// that Validate checks and String shows the subject in use. It changes c's
// Downstreams map in place (Load's own).
func (c Config) withDeadLetterSubjects() Config {
	for name, d := range c.Downstreams {
		if d.DeadLetter == "" {
			d.DeadLetter = d.DeadLetterSubject(name)
			c.Downstreams[name] = d
		}
	}
	return c
}
