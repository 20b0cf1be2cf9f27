package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestEnvOverrides(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() // admin.tls files must be readable
	crt, key := filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key")
	for _, f := range []string{crt, key} {
		if err := os.WriteFile(f, []byte("PEM\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		file  string
		env   []string
		check func(t *testing.T, c Config)
	}{
		{"top level", "", []string{"SHAPER_ADMIN_LISTEN=127.0.0.1:9999", "SHAPER_NATS_URL=nats://10.0.0.5:4222"}, func(t *testing.T, c Config) {
			eq(t, c.Admin.Listen, "127.0.0.1:9999")
			eq(t, c.NATS.URL, "nats://10.0.0.5:4222")
		}},
		{"top level parsed types", "testdata/full.yaml", []string{"SHAPER_INGRESS_MAX_PAYLOAD=2MiB", "SHAPER_SHUTDOWN_GRACE=30s", "SHAPER_INGRESS_DEDUPE_WINDOW=5m"}, func(t *testing.T, c Config) {
			eq(t, c.Ingress.MaxPayload, ByteSize(2<<20))
			eq(t, c.ShutdownGrace, 30*time.Second)
			eq(t, c.Ingress.DedupeWindow, 5*time.Minute)
		}},
		{"nested overrides file value", "testdata/full.yaml", []string{"SHAPER_DOWNSTREAMS_PRINTER_RATE=5/s", "SHAPER_DOWNSTREAMS_PRINTER_QUEUE_CAPACITY=20"}, func(t *testing.T, c Config) {
			eq(t, c.Downstreams["printer"].Rate, Rate(5))
			eq(t, c.Downstreams["printer"].Queue.Capacity, 20)
		}},
		{"dash in name", "testdata/full.yaml", []string{"SHAPER_DOWNSTREAMS_LEGACY_ERP_RATE=1/s", "SHAPER_DOWNSTREAMS_LEGACY_ERP_SINK_NATS_REQUEST=false"}, func(t *testing.T, c Config) {
			eq(t, c.Downstreams["legacy-erp"].Rate, Rate(1))
			eq(t, c.Downstreams["legacy-erp"].Sink.NATS.Request, false)
		}},
		{"sink and header", "testdata/full.yaml", []string{"SHAPER_DOWNSTREAMS_PRINTER_SINK_HTTP_URL=https://print.example/v1", "SHAPER_DOWNSTREAMS_PRINTER_SINK_HTTP_HEADERS_X_API_KEY=from-env"}, func(t *testing.T, c Config) {
			eq(t, c.Downstreams["printer"].Sink.HTTP.URL, "https://print.example/v1")
			eq(t, c.Downstreams["printer"].Sink.HTTP.Headers["x-api-key"], "from-env")
		}},
		{"defaults a key the file leaves out", "testdata/minimal.yaml", []string{"SHAPER_DOWNSTREAMS_PRINTER_CONCURRENCY=4", "SHAPER_DOWNSTREAMS_PRINTER_QUEUE_BACKEND=memory", "SHAPER_DOWNSTREAMS_PRINTER_SINK_HTTP_METHOD=PUT"}, func(t *testing.T, c Config) {
			eq(t, c.Downstreams["printer"].Concurrency, 4)
			eq(t, c.Downstreams["printer"].Queue.Backend, "memory")
			eq(t, c.Downstreams["printer"].Sink.HTTP.Method, "PUT")
		}},
		{"dead letters", "testdata/minimal.yaml", []string{"SHAPER_DOWNSTREAMS_PRINTER_DEAD_LETTERS_MAX_AGE=24h", "SHAPER_DOWNSTREAMS_PRINTER_DEAD_LETTERS_MAX_COUNT=50", "SHAPER_DOWNSTREAMS_PRINTER_DEAD_LETTER=dl.printer"}, func(t *testing.T, c Config) {
			eq(t, c.Downstreams["printer"].DeadLetters, DeadLetters{MaxAge: 24 * time.Hour, MaxCount: 50})
			eq(t, c.Downstreams["printer"].DeadLetter, "dl.printer")
		}},
		{"env makes admission present", "testdata/minimal.yaml", []string{"SHAPER_DOWNSTREAMS_PRINTER_ADMISSION_MODE=gcra", "SHAPER_DOWNSTREAMS_PRINTER_ADMISSION_RATE=10/m", "SHAPER_DOWNSTREAMS_PRINTER_ADMISSION_BURST=3"}, func(t *testing.T, c Config) {
			eq(t, *c.Downstreams["printer"].Admission, Admission{Mode: "gcra", Rate: Rate(10.0 / 60), Burst: 3})
		}},
		{"admin auth and tls", "testdata/minimal.yaml", []string{
			"SHAPER_ADMIN_BASIC_AUTH_USERNAME=ops",
			"SHAPER_ADMIN_BASIC_AUTH_PASSWORD_HASH=$2a$10$bQ54WnuLwH/t/HFN0qzCZuN7EnIxb9CPAfLrsCF/3MTnLwwD/jwbi",
			"SHAPER_ADMIN_TLS_CERT_FILE=" + crt,
			"SHAPER_ADMIN_TLS_KEY_FILE=" + key,
		}, func(t *testing.T, c Config) {
			eq(t, c.Admin.BasicAuth, AdminBasicAuth{Username: "ops", PasswordHash: "$2a$10$bQ54WnuLwH/t/HFN0qzCZuN7EnIxb9CPAfLrsCF/3MTnLwwD/jwbi"})
			eq(t, c.Admin.TLS, AdminTLS{CertFile: crt, KeyFile: key})
		}},
		{"empty, unrelated and shaperctl's vars are ignored", "testdata/minimal.yaml", []string{"SHAPER_DOWNSTREAMS_PRINTER_RATE=", "SHAPER_DOWNSTREAMS_GHOST_RATE=", "PATH=/bin", "SHAPERD_PPROF_LISTEN=127.0.0.1:6060",
			"SHAPER_ADMIN_URL=https://127.0.0.1:9090", "SHAPER_ADMIN_USER=ops", "SHAPER_ADMIN_PASSWORD=pw", "SHAPER_ADMIN_CA=/etc/shaper/ca.pem"}, func(t *testing.T, c Config) {
			eq(t, c.Downstreams["printer"].Rate, Rate(2))
			eq(t, len(c.Downstreams), 1)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := LoadWith(tt.file, Options{Environ: tt.env})
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestEnvInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"bad rate", []string{"SHAPER_DOWNSTREAMS_PRINTER_RATE=fast"},
			`downstreams.printer.rate: "fast" is not a rate; write e.g. 2/s or 120/m (env SHAPER_DOWNSTREAMS_PRINTER_RATE)`},
		{"zero capacity", []string{"SHAPER_DOWNSTREAMS_PRINTER_QUEUE_CAPACITY=0"},
			`downstreams.printer.queue.capacity: must be 1..1000000, got 0 (env SHAPER_DOWNSTREAMS_PRINTER_QUEUE_CAPACITY)`},
		{"not a number", []string{"SHAPER_DOWNSTREAMS_PRINTER_QUEUE_CAPACITY=ten"},
			`downstreams.printer.queue.capacity: "ten" is not a whole number (env SHAPER_DOWNSTREAMS_PRINTER_QUEUE_CAPACITY)`},
		{"second sink", []string{"SHAPER_DOWNSTREAMS_PRINTER_SINK_NATS_SUBJECT=x.y"},
			`downstreams.printer.sink: has both http and nats; keep exactly one`},
		{"bad bool", []string{"SHAPER_DOWNSTREAMS_PRINTER_SINK_NATS_REQUEST=maybe", "SHAPER_DOWNSTREAMS_PRINTER_SINK_HTTP_URL=http://h/"},
			`downstreams.printer.sink: has both http and nats; keep exactly one
downstreams.printer.sink.nats.request: "maybe" is not true or false (env SHAPER_DOWNSTREAMS_PRINTER_SINK_NATS_REQUEST)`},
		// An env var that sets no key is an error, never silently ignored.
		{"misspelled downstream", []string{"SHAPER_DOWNSTREAMS_PRINTR_RATE=5/s"},
			`SHAPER_DOWNSTREAMS_PRINTR_RATE: names no downstream in the config file (configured: printer); env cannot add a downstream; did you mean SHAPER_DOWNSTREAMS_PRINTER_RATE (downstreams.printer.rate)?`},
		{"misspelled key", []string{"SHAPER_DOWNSTREAMS_PRINTER_RAT=5/s"},
			`SHAPER_DOWNSTREAMS_PRINTER_RAT: matches no key of downstreams.printer; did you mean SHAPER_DOWNSTREAMS_PRINTER_RATE (downstreams.printer.rate)?`},
		{"unknown downstream", []string{"SHAPER_DOWNSTREAMS_SCANNER_RATE=5/s"},
			`SHAPER_DOWNSTREAMS_SCANNER_RATE: names no downstream in the config file (configured: printer); env cannot add a downstream`},
		{"no such key", []string{"SHAPER_DOWNSTREAMS_PRINTER_SPEED=5/s"},
			`SHAPER_DOWNSTREAMS_PRINTER_SPEED: matches no key of downstreams.printer; keys here: rate, concurrency, queue, admission, sink, retry, dead_letter, dead_letters, rate_control, shadow, breaker, maintenance, outcomes, batch (a section's keys follow its name: SHAPER_DOWNSTREAMS_PRINTER_QUEUE_CAPACITY)`},
		{"misspelled top-level key", []string{"SHAPER_NATS_URLS=nats://10.0.0.5:4222"},
			`SHAPER_NATS_URLS: matches no config key; did you mean SHAPER_NATS_URL (nats.url)?`},
		{"not a key at all", []string{"SHAPER_VERBOSE=1"},
			`SHAPER_VERBOSE: matches no config key; top-level keys: nats, admin, ingress, shutdown_grace, tracing, downstreams (a section's keys follow its name: SHAPER_NATS_URL)`},
		{"header the file does not name", []string{"SHAPER_DOWNSTREAMS_PRINTER_SINK_HTTP_HEADERS_X_API_KEY=k"},
			`SHAPER_DOWNSTREAMS_PRINTER_SINK_HTTP_HEADERS_X_API_KEY: sets a header the file does not name under downstreams.printer.sink.http.headers; env can override a header there, not add one: write it in the config file`},
		{"a section, not a key", []string{"SHAPER_DOWNSTREAMS_PRINTER_QUEUE=10"},
			`SHAPER_DOWNSTREAMS_PRINTER_QUEUE: matches no key of downstreams.printer; keys here: rate, concurrency, queue, admission, sink, retry, dead_letter, dead_letters, rate_control, shadow, breaker, maintenance, outcomes, batch (a section's keys follow its name: SHAPER_DOWNSTREAMS_PRINTER_QUEUE_CAPACITY)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := LoadWith("testdata/minimal.yaml", Options{Environ: tt.env})
			if err == nil || err.Error() != tt.want {
				t.Errorf("err:\n%v\nwant:\n%s", err, tt.want)
			}
		})
	}
}

// TestAutomaticEnv covers the default path, where viper's AutomaticEnv
// reads the process environment.
func TestAutomaticEnv(t *testing.T) {
	t.Setenv("SHAPER_DOWNSTREAMS_PRINTER_RATE", "5/s")
	t.Setenv("SHAPER_DOWNSTREAMS_LEGACY_ERP_QUEUE_CAPACITY", "20")
	t.Setenv("SHAPER_DOWNSTREAMS_PRINTER_SINK_HTTP_HEADERS_X_API_KEY", "from-env")
	t.Setenv("SHAPER_ADMIN_LISTEN", "127.0.0.1:9999")
	c, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	eq(t, c.Downstreams["printer"].Rate, Rate(5))
	eq(t, c.Downstreams["legacy-erp"].Queue.Capacity, 20)
	eq(t, c.Downstreams["printer"].Sink.HTTP.Headers["x-api-key"], "from-env")
	eq(t, c.Admin.Listen, "127.0.0.1:9999")

	t.Setenv("SHAPER_DOWNSTREAMS_PRINTER_QUEUE_CAPACITY", "0")
	_, err = Load("testdata/full.yaml")
	want := `downstreams.printer.queue.capacity: must be 1..1000000, got 0 (env SHAPER_DOWNSTREAMS_PRINTER_QUEUE_CAPACITY)`
	if err == nil || err.Error() != want {
		t.Errorf("err:\n%v\nwant:\n%s", err, want)
	}

	t.Setenv("SHAPER_DOWNSTREAMS_PRINTER_QUEUE_CAPACITY", "")
	t.Setenv("SHAPER_DOWNSTREAMS_PRINTER_RAT", "5/s")
	_, err = Load("testdata/full.yaml")
	want = `SHAPER_DOWNSTREAMS_PRINTER_RAT: matches no key of downstreams.printer; did you mean SHAPER_DOWNSTREAMS_PRINTER_RATE (downstreams.printer.rate)?`
	if err == nil || err.Error() != want {
		t.Errorf("err:\n%v\nwant:\n%s", err, want)
	}
}

func TestEnvName(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]string{
		"nats.url":                        "SHAPER_NATS_URL",
		"downstreams.printer.rate":        "SHAPER_DOWNSTREAMS_PRINTER_RATE",
		"downstreams.legacy-erp.rate":     "SHAPER_DOWNSTREAMS_LEGACY_ERP_RATE",
		"ingress.subject_prefix":          "SHAPER_INGRESS_SUBJECT_PREFIX",
		"downstreams.p.queue.max_wait":    "SHAPER_DOWNSTREAMS_P_QUEUE_MAX_WAIT",
		"downstreams.p.sink.http.url":     "SHAPER_DOWNSTREAMS_P_SINK_HTTP_URL",
		"downstreams.p.retry.max_backoff": "SHAPER_DOWNSTREAMS_P_RETRY_MAX_BACKOFF",
	} {
		eq(t, EnvName(key), want)
	}
}

func eq[T any](t *testing.T, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) { // Admission holds a slice (limits)
		t.Errorf("got %v, want %v", got, want)
	}
}
