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
	Downstreams   map[string]Downstream `mapstructure:"downstreams"`
}

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
}

// Embedded configures the in-process NATS server.
type Embedded struct {
	Listen   string `mapstructure:"listen"`
	StoreDir string `mapstructure:"store_dir"`
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
}

// Downstream configures one protected backend.
type Downstream struct {
	Rate        Rate       `mapstructure:"rate"`
	Concurrency int        `mapstructure:"concurrency"`
	Queue       Queue      `mapstructure:"queue"`
	Admission   *Admission `mapstructure:"admission"`
	Sink        Sink       `mapstructure:"sink"`
	Retry       Retry      `mapstructure:"retry"`
	DeadLetter  string     `mapstructure:"dead_letter"`
}

// Queue configures a downstream's bounded queue.
type Queue struct {
	Capacity int           `mapstructure:"capacity"`
	Backend  string        `mapstructure:"backend"`  // jetstream | memory
	MaxWait  time.Duration `mapstructure:"max_wait"` // 0 = no limit
}

// Admission configures per-key admission control. token_bucket and gcra use
// Rate and Burst; fixed_window, sliding_log and sliding_counter use Limit and
// Window. Setting a field the mode does not use is an error.
type Admission struct {
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

// Retry configures delivery retries.
type Retry struct {
	MaxAttempts    int           `mapstructure:"max_attempts"`
	InitialBackoff time.Duration `mapstructure:"initial_backoff"`
	MaxBackoff     time.Duration `mapstructure:"max_backoff"`
}
