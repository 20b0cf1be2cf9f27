package config

import (
	"errors"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"time"
)

// noEnv is an empty environment: tests that use it ignore the process env
// and can run in parallel.
var noEnv = Options{Environ: []string{}}

// TestLoadFailures keeps one testdata file per failure mode and asserts its
// exact message, every line of it.
func TestLoadFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file string
		want string
	}{
		{"unknown_key", `downstreams.printer.queue.capacity: must be 1..1000000, got 0 (env SHAPER_DOWNSTREAMS_PRINTER_QUEUE_CAPACITY)
downstreams.printer.queue.capasity: unknown key; valid keys here: capacity, backend, max_wait, max_cost, reject_would_expire, fairness, key_capacity, weights, max_bytes, priorities, max_delay, key_concurrency, placement`},
		{"store_bounds", `downstreams.printer.queue.max_bytes: must be 0 (no byte bound) or 64KiB (ingress.max_payload)..1024GiB, got 1KiB (env SHAPER_DOWNSTREAMS_PRINTER_QUEUE_MAX_BYTES)
downstreams.scanner.queue.max_bytes: must be 0 (no byte bound) or 64KiB (ingress.max_payload)..1024GiB, got 2048GiB (env SHAPER_DOWNSTREAMS_SCANNER_QUEUE_MAX_BYTES)
nats.embedded.max_store: must be 0 (the server's own limit) or 1MiB..1048576GiB, got 512KiB (env SHAPER_NATS_EMBEDDED_MAX_STORE)`},
		{"store_too_small", `nats.embedded.max_store: cannot hold the bounds it must keep room for: downstreams.printer.queue.max_bytes 2MiB + dead letters' room 2304KiB (2 downstreams × 1152KiB) + outcomes' room 598KiB (printer 299KiB, scanner 299KiB) + 409KiB for KV buckets + one message of 576KiB for each jetstream queue without queue.max_bytes (scanner) = at least 5935KiB; raise it, or lower the queues' queue.max_bytes or ingress.max_payload, or keep less of the outcomes (a lower outcomes.result_bytes, or outcomes.keep 0) (env SHAPER_NATS_EMBEDDED_MAX_STORE)`},
		{"store_remote", `nats.embedded.max_store: is only used by the embedded server (nats.url empty); remove it, or set the limit on the NATS server or account (env SHAPER_NATS_EMBEDDED_MAX_STORE)`},
		{"unknown_top_key", `shutdown_grase: unknown key; valid keys here: nats, admin, ingress, shutdown_grace, tracing, downstreams`},
		{"bad_rate", `downstreams.printer.rate: "fast" is not a rate; write e.g. 2/s or 120/m (env SHAPER_DOWNSTREAMS_PRINTER_RATE)`},
		{"bare_rate", `downstreams.printer.rate: "2" is not a rate: it needs a unit; write e.g. 2/s or 2/m (env SHAPER_DOWNSTREAMS_PRINTER_RATE)`},
		{"priorities_bad", `downstreams.printer.queue.priorities: must be 1..10, got 11 (env SHAPER_DOWNSTREAMS_PRINTER_QUEUE_PRIORITIES)`},
		{"key_concurrency_bad", `downstreams.printer.queue.key_concurrency: must be 0 (off) or 1..concurrency (4), got 5 (env SHAPER_DOWNSTREAMS_PRINTER_QUEUE_KEY_CONCURRENCY)
downstreams.scanner.queue.key_concurrency: must be 0 (off) or 1..concurrency (1), got -1 (env SHAPER_DOWNSTREAMS_SCANNER_QUEUE_KEY_CONCURRENCY)`},
		{"max_delay_bad", `downstreams.printer.queue.max_delay: must be 1ms..168h, got 200h (env SHAPER_DOWNSTREAMS_PRINTER_QUEUE_MAX_DELAY)`},
		{"zero_capacity", `downstreams.printer.queue.capacity: must be 1..1000000, got 0 (env SHAPER_DOWNSTREAMS_PRINTER_QUEUE_CAPACITY)`},
		{"missing_sink", `downstreams.printer.sink: required; set sink.http.url or sink.nats.subject (env SHAPER_DOWNSTREAMS_PRINTER_SINK_HTTP_URL or SHAPER_DOWNSTREAMS_PRINTER_SINK_NATS_SUBJECT)`},
		{"two_sinks", `downstreams.printer.sink: has both http and nats; keep exactly one`},
		{"bad_name", `downstreams.bad.name: "bad.name" is not a downstream name; use letters, digits, - and _`},
		{"env_collision", `downstreams.legacy_erp: its env vars (SHAPER_DOWNSTREAMS_LEGACY_ERP_RATE) are also those of downstreams.legacy-erp; rename one`},
		{"bad_admission_mode", `downstreams.printer.admission.mode: "leaky" is not an admission mode; use token_bucket, gcra, fixed_window, sliding_log or sliding_counter (env SHAPER_DOWNSTREAMS_PRINTER_ADMISSION_MODE)`},
		{"wrong_mode_field", `downstreams.printer.admission.limit: is not used by mode token_bucket; remove it, or use mode fixed_window, sliding_log or sliding_counter (env SHAPER_DOWNSTREAMS_PRINTER_ADMISSION_LIMIT)`},
		{"bad_size", `ingress.max_payload: "1MB" is not a size: units are binary, write e.g. 64KiB or 1MiB (env SHAPER_INGRESS_MAX_PAYLOAD)`},
		{"size_too_large", `ingress.max_payload: must be 1B..64MiB, got 128MiB (env SHAPER_INGRESS_MAX_PAYLOAD)`},
		{"bad_backend", `downstreams.printer.queue.backend: "redis" is not a queue backend; use jetstream or memory (env SHAPER_DOWNSTREAMS_PRINTER_QUEUE_BACKEND)`},
		{"bad_url", `downstreams.printer.sink.http.url: "ftp://host/x" is not an absolute http or https URL; write e.g. http://127.0.0.1:8080/print (env SHAPER_DOWNSTREAMS_PRINTER_SINK_HTTP_URL)`},
		{"dead_letter_loop", `downstreams.printer.dead_letter: "shaper.jobs.printer" is under ingress.subject_prefix "shaper.jobs", so jobs would loop back into the intake; use another subject (env SHAPER_DOWNSTREAMS_PRINTER_DEAD_LETTER)`},
		{"dead_letters_bounds", `downstreams.printer.dead_letters.max_age: must be 1m..8760h, got 30s (env SHAPER_DOWNSTREAMS_PRINTER_DEAD_LETTERS_MAX_AGE)
downstreams.printer.dead_letters.max_count: must be 1..10000000, got 0 (env SHAPER_DOWNSTREAMS_PRINTER_DEAD_LETTERS_MAX_COUNT)
downstreams.scanner.dead_letters.max_age: must be 1m..8760h, got 9000h (env SHAPER_DOWNSTREAMS_SCANNER_DEAD_LETTERS_MAX_AGE)
downstreams.scanner.dead_letters.max_bytes: unknown key; valid keys here: max_age, max_count
downstreams.scanner.dead_letters.max_count: must be 1..10000000, got 20000000 (env SHAPER_DOWNSTREAMS_SCANNER_DEAD_LETTERS_MAX_COUNT)`},
		{"dead_letter_shared", `downstreams.b.dead_letter: "dl.shared" is also the dead-letter subject of downstreams.a; give each downstream its own (each keeps its dead letters in a stream of its own) (env SHAPER_DOWNSTREAMS_B_DEAD_LETTER)
downstreams.c.dead_letter: "erp.orders" is the sink.nats.subject of downstreams.a, so its deliveries would be stored as dead letters; use another subject (env SHAPER_DOWNSTREAMS_C_DEAD_LETTER)
downstreams.d.dead_letter: "shaper.queue.d" is under nats.jetstream.subject_prefix "shaper.queue", where durable queues keep their jobs; use another subject, e.g. shaper.dead.d (env SHAPER_DOWNSTREAMS_D_DEAD_LETTER)`},
		{"dead_letter_default_loop", `downstreams.printer.dead_letter: "shaper.dead.printer" is under ingress.subject_prefix "shaper", so jobs would loop back into the intake; use another subject (env SHAPER_DOWNSTREAMS_PRINTER_DEAD_LETTER)
ingress.bulk.subject_prefix: "shaper.bulk" overlaps ingress.subject_prefix "shaper", so bulk requests would be taken as jobs; use another subject, e.g. shaper.bulk (env SHAPER_INGRESS_BULK_SUBJECT_PREFIX)
ingress.events_prefix: "shaper.events" overlaps ingress.subject_prefix "shaper", so events would be taken as jobs; use another subject, e.g. shaper.events (env SHAPER_INGRESS_EVENTS_PREFIX)
ingress.status_prefix: "shaper.status" overlaps ingress.subject_prefix "shaper", so status requests would be taken as jobs; use another subject, e.g. shaper.status (env SHAPER_INGRESS_STATUS_PREFIX)
nats.jetstream.subject_prefix: "shaper.queue" overlaps ingress.subject_prefix "shaper", so stored jobs would loop back into the intake; use another subject, e.g. shaper.queue (env SHAPER_NATS_JETSTREAM_SUBJECT_PREFIX)`},
		{"nats_wildcard", `downstreams.printer.sink.nats.subject: "erp.*" is not a NATS subject without wildcards; use dot-separated tokens without spaces, * or >, e.g. shaper.jobs (env SHAPER_DOWNSTREAMS_PRINTER_SINK_NATS_SUBJECT)`},
		{"bad_subject_prefix", `ingress.subject_prefix: "shaper.>" is not a NATS subject without wildcards; use dot-separated tokens without spaces, * or >, e.g. shaper.jobs (env SHAPER_INGRESS_SUBJECT_PREFIX)`},
		{"backoff_order", `downstreams.printer.retry.initial_backoff: 2m is more than retry.max_backoff 1m; make it at most that (env SHAPER_DOWNSTREAMS_PRINTER_RETRY_INITIAL_BACKOFF)
downstreams.printer.retry.max_attempts: must be 1..100, got 0 (env SHAPER_DOWNSTREAMS_PRINTER_RETRY_MAX_ATTEMPTS)`},
		{"fractional_concurrency", `downstreams.printer.concurrency: "2.5" is not a whole number (env SHAPER_DOWNSTREAMS_PRINTER_CONCURRENCY)`},
		{"bare_duration", `shutdown_grace: "10" is not a duration: it needs a unit; write e.g. 10s or 10ms (env SHAPER_SHUTDOWN_GRACE)`},
		{"section_not_mapping", `downstreams.printer.queue: expected a mapping with keys capacity, backend, max_wait, max_cost, reject_would_expire, fairness, key_capacity, weights, max_bytes, priorities, max_delay, key_concurrency, placement, got "10"
downstreams.printer.rate: required; write e.g. 2/s or 120/m (env SHAPER_DOWNSTREAMS_PRINTER_RATE)
downstreams.printer.sink: required; set sink.http.url or sink.nats.subject (env SHAPER_DOWNSTREAMS_PRINTER_SINK_HTTP_URL or SHAPER_DOWNSTREAMS_PRINTER_SINK_NATS_SUBJECT)`},
		{"secrets", `nats.password: expected a single value, got a list (env SHAPER_NATS_PASSWORD)
nats.token: cannot be combined with nats.user, nats.creds or nats.nkey; use one way to authenticate (env SHAPER_NATS_TOKEN)`},
		{"bad_header", `downstreams.printer.sink.http.headers.authorization: expected a header value, got a list
downstreams.printer.sink.http.headers.x.tenant: "x.tenant" is not a header name; use letters, digits and -`},
		{"admin_auth_no_hash", `admin.basic_auth.password_hash: required when admin.basic_auth.username is set; write a bcrypt hash, e.g. from htpasswd -nbBC 10 USER PASSWORD (env SHAPER_ADMIN_BASIC_AUTH_PASSWORD_HASH)`},
		{"admin_auth_no_user", `admin.basic_auth.username: required when admin.basic_auth.password_hash is set (env SHAPER_ADMIN_BASIC_AUTH_USERNAME)`},
		{"admin_bad_username", `admin.basic_auth.username: "ops:admin" cannot be a basic auth user name; it must not contain ':' or control characters (env SHAPER_ADMIN_BASIC_AUTH_USERNAME)`},
		{"admin_bad_hash", `admin.basic_auth.password_hash: is not a bcrypt hash (60 characters starting $2a$, $2b$ or $2y$; the value is not shown); write one e.g. with htpasswd -nbBC 10 USER PASSWORD (env SHAPER_ADMIN_BASIC_AUTH_PASSWORD_HASH)`},
		{"admin_hash_cost", `admin.basic_auth.password_hash: bcrypt cost 13 makes every admin request take seconds; use a cost of 4..12 (10 is usual) (env SHAPER_ADMIN_BASIC_AUTH_PASSWORD_HASH)`},
		{"admin_tls_half", `admin.tls.cert_file: cannot read "/etc/shaper/admin.crt": no such file or directory; write the path of a readable PEM certificate file (env SHAPER_ADMIN_TLS_CERT_FILE)
admin.tls.key_file: required when admin.tls.cert_file is set; set both or neither (neither serves plain HTTP) (env SHAPER_ADMIN_TLS_KEY_FILE)`},
		{"files_missing", `admin.tls.cert_file: "testdata" is a directory; write the path of a readable PEM certificate file (env SHAPER_ADMIN_TLS_CERT_FILE)
admin.tls.key_file: cannot read "testdata/missing/admin-key.pem": no such file or directory; write the path of a readable PEM private key file (env SHAPER_ADMIN_TLS_KEY_FILE)
nats.creds: cannot read "testdata/missing/user.creds": no such file or directory; write the path of a readable NATS credentials file (.creds) (env SHAPER_NATS_CREDS)
nats.tls.ca: cannot read "testdata/missing/ca.pem": no such file or directory; write the path of a readable PEM CA file (env SHAPER_NATS_TLS_CA)
nats.tls.cert: cannot read "testdata/missing/client.pem": no such file or directory; write the path of a readable PEM certificate file (env SHAPER_NATS_TLS_CERT)
nats.tls.key: cannot read "testdata/missing/client-key.pem": no such file or directory; write the path of a readable PEM private key file (env SHAPER_NATS_TLS_KEY)`},
		{"nkey_missing", `nats.nkey: cannot read "testdata/missing/user.nk": no such file or directory; write the path of a readable nkey seed file (env SHAPER_NATS_NKEY)`},
		{"bad_jetstream", `nats.jetstream.pinned_ttl: must be 1s..1h, got 100ms (env SHAPER_NATS_JETSTREAM_PINNED_TTL)
nats.jetstream.replicas: must be 1..5 (3 for a 3-node cluster), got 7 (env SHAPER_NATS_JETSTREAM_REPLICAS)
nats.jetstream.storage: "disk" is not a storage type; use file (survives a NATS restart) or memory (env SHAPER_NATS_JETSTREAM_STORAGE)
nats.jetstream.stream_prefix: "SHAPER.Q" is not a stream name prefix; use 1..32 letters, digits, - and _, e.g. SHAPER (env SHAPER_NATS_JETSTREAM_STREAM_PREFIX)
nats.jetstream.subject_prefix: "shaper.jobs.stored" overlaps ingress.subject_prefix "shaper.jobs", so stored jobs would loop back into the intake; use another subject, e.g. shaper.queue (env SHAPER_NATS_JETSTREAM_SUBJECT_PREFIX)`},
		{"truncated", `config file "testdata/truncated.yaml": invalid YAML: line 3: found unexpected end of stream`},
		{"not_a_mapping", `config file "testdata/not_a_mapping.yaml": invalid YAML: unmarshal errors: line 1: cannot unmarshal !!seq into map[string]interface {}`},
		// Several problems at once, sorted by key: parse errors, unknown
		// keys and range errors, in two downstreams.
		{"multi", `admin.listen: "nowhere" is not a listen address; write host:port, e.g. 127.0.0.1:9090 (env SHAPER_ADMIN_LISTEN)
downstreams.printer.concurrency: must be 1..10000, got 0 (env SHAPER_DOWNSTREAMS_PRINTER_CONCURRENCY)
downstreams.printer.queue.capacity: must be 1..1000000, got 0 (env SHAPER_DOWNSTREAMS_PRINTER_QUEUE_CAPACITY)
downstreams.printer.queue.max_wiat: unknown key; valid keys here: capacity, backend, max_wait, max_cost, reject_would_expire, fairness, key_capacity, weights, max_bytes, priorities, max_delay, key_concurrency, placement
downstreams.printer.rate: "fast" is not a rate; write e.g. 2/s or 120/m (env SHAPER_DOWNSTREAMS_PRINTER_RATE)
downstreams.printer.sink.http.timeout: "soon" is not a duration; write e.g. 10s, 1m30s or 2h (env SHAPER_DOWNSTREAMS_PRINTER_SINK_HTTP_TIMEOUT)
downstreams.scanner.sink: required; set sink.http.url or sink.nats.subject (env SHAPER_DOWNSTREAMS_SCANNER_SINK_HTTP_URL or SHAPER_DOWNSTREAMS_SCANNER_SINK_NATS_SUBJECT)
ingress.max_payload: "huge" is not a size; write e.g. 512B, 64KiB or 1MiB (env SHAPER_INGRESS_MAX_PAYLOAD)`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			cfg, err := LoadWith("testdata/"+tt.file+".yaml", noEnv)
			if err == nil {
				t.Fatalf("Load succeeded, want error:\n%s", tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error:\n%s\nwant:\n%s", got, tt.want)
			}
			if !reflect.DeepEqual(cfg, Config{}) {
				t.Errorf("Load returned a non-zero Config with an error")
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "$2a$1") {
				t.Errorf("error leaks a secret: %s", err)
			}
		})
	}
}

func TestLoadProblemsAreTyped(t *testing.T) {
	t.Parallel()
	_, err := LoadWith("testdata/bad_rate.yaml", noEnv)
	var p *Problem
	if !errors.As(err, &p) {
		t.Fatalf("errors.As(%v, *Problem) = false", err)
	}
	want := Problem{Key: "downstreams.printer.rate", Env: "SHAPER_DOWNSTREAMS_PRINTER_RATE", Msg: `"fast" is not a rate; write e.g. 2/s or 120/m`}
	if *p != want {
		t.Errorf("Problem = %+v, want %+v", *p, want)
	}
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	_, err := LoadWith("testdata/nope.yaml", noEnv)
	if want := `config file "testdata/nope.yaml": no such file`; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("errors.Is(err, fs.ErrNotExist) = false")
	}
}

func TestLoadNoFile(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"", "testdata/empty.yaml"} {
		cfg, err := LoadWith(path, noEnv)
		if err != nil {
			t.Fatalf("Load(%q): %v", path, err)
		}
		if !reflect.DeepEqual(cfg, Defaults()) {
			t.Errorf("Load(%q) =\n%v\nwant Defaults() =\n%v", path, cfg, Defaults())
		}
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	d := Defaults()
	if err := d.Validate(); err != nil {
		t.Fatalf("Defaults().Validate(): %v", err)
	}
	want := Config{
		NATS: NATS{Embedded: Embedded{Listen: "127.0.0.1:4222", StoreDir: "./data/nats"},
			JetStream: JetStream{StreamPrefix: "SHAPER", SubjectPrefix: "shaper.queue", Replicas: 1,
				Storage: "file", AckWait: 5 * time.Second, PinnedTTL: 5 * time.Second,
				AdmissionBucket: "SHAPER_ADMISSION", AdmissionTimeout: 250 * time.Millisecond,
				RatesBucket: "SHAPER_RATES"}},
		Admin: Admin{Listen: "127.0.0.1:9090"},
		Ingress: Ingress{SubjectPrefix: "shaper.jobs", QueueGroup: "shaper", KeyHeader: "Shaper-Key",
			MaxPayload: 1 << 20, DedupeWindow: 2 * time.Minute,
			StatusPrefix: "shaper.status", EventsPrefix: "shaper.events",
			Bulk: Bulk{SubjectPrefix: "shaper.bulk", MaxJobs: 1000, MaxBytes: 8 << 20}},
		ShutdownGrace: 10 * time.Second,
		Tracing:       Tracing{Parent: "producer"},
	}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("Defaults() = %+v, want %+v", d, want)
	}
}

// defaultBreaker is downstreams.NAME.breaker when not configured: on.
var defaultBreaker = Breaker{Failures: 5, OpenFor: 5 * time.Second, MaxOpenFor: 5 * time.Minute}

// defaultOutcomes is downstreams.NAME.outcomes when not configured.
var defaultOutcomes = Outcomes{Keep: 24 * time.Hour, ResultBytes: 64 << 10, MaxRecords: 100000}

func TestLoadMinimalAppliesDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := LoadWith("testdata/minimal.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults()
	want.Downstreams = map[string]Downstream{"printer": {
		Rate:        2,
		Concurrency: 1,
		Queue:       Queue{Capacity: 10, Backend: "jetstream", MaxCost: 1, Fairness: "none", Priorities: 1, MaxDelay: 24 * time.Hour}, // kept as configured; the daemon refuses it
		Sink:        Sink{HTTP: &HTTPSink{URL: "http://127.0.0.1:8080/print", Method: "POST", Timeout: 10 * time.Second}},
		Retry:       Retry{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: time.Minute},
		DeadLetter:  "shaper.dead.printer", // the default: shaper.dead.<name>
		DeadLetters: DeadLetters{MaxAge: 168 * time.Hour, MaxCount: 10000},
		RateControl: "fixed",
		Breaker:     defaultBreaker,
		Outcomes:    defaultOutcomes,
	}}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("Load =\n%v\nwant\n%v", cfg, want)
	}
}

func TestLoadFull(t *testing.T) {
	t.Parallel()
	cfg, err := LoadWith("testdata/full.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults()
	want.Downstreams = map[string]Downstream{
		"printer": {
			Rate:        2,
			Concurrency: 1,
			Queue:       Queue{Capacity: 10, Backend: "memory", MaxWait: 5 * time.Minute, MaxCost: 1, Fairness: "none", Priorities: 1, MaxDelay: 24 * time.Hour},
			Admission:   &Admission{Mode: "token_bucket", Rate: 1, Burst: 5},
			Sink: Sink{HTTP: &HTTPSink{URL: "http://127.0.0.1:8080/print", Method: "POST", Timeout: 10 * time.Second,
				Headers: map[string]string{"x-api-key": "secret-key"}}},
			Retry:       Retry{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: time.Minute},
			DeadLetter:  "shaper.dead.printer",
			DeadLetters: DeadLetters{MaxAge: 24 * time.Hour, MaxCount: 500},
			RateControl: "fixed",
			Breaker:     defaultBreaker,
			Outcomes:    defaultOutcomes,
		},
		"legacy-erp": {
			Rate:        2,
			Concurrency: 1,
			Queue:       Queue{Capacity: 100, Backend: "memory", MaxCost: 1, Fairness: "none", Priorities: 1, MaxDelay: 24 * time.Hour},
			Admission:   &Admission{Mode: "sliding_counter", Limit: 100, Window: time.Minute},
			Sink:        Sink{NATS: &NATSSink{Subject: "erp.orders", Request: true, Timeout: 5 * time.Second}},
			Retry:       Retry{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: time.Minute},
			DeadLetter:  "shaper.dead.legacy-erp", // the default
			DeadLetters: DeadLetters{MaxAge: 168 * time.Hour, MaxCount: 10000},
			RateControl: "fixed",
			Breaker:     defaultBreaker,
			Outcomes:    defaultOutcomes,
		},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("Load =\n%v\nwant\n%v", cfg, want)
	}
}
