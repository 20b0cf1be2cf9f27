package config

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaper/limiter"
	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/policy"
	"github.com/shaperd/shaper/shaper/settings"
)

func TestShaperSettings(t *testing.T) {
	t.Parallel()
	cfg, err := LoadWith("testdata/full.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	on := policy.BreakerSettings{Failures: 5, OpenFor: 5 * time.Second, MaxOpenFor: 5 * time.Minute} // the default
	want := shaper.Settings{
		ShutdownGrace: 10 * time.Second, Tracing: settings.Tracing{SubjectPrefix: "shaper.jobs"},
		Lanes: []shaper.LaneSettings{
			{
				Name: "legacy-erp", Rate: 2, Concurrency: 1, Capacity: 100,
				Admission:   &limiter.Config{Mode: limiter.SlidingCounterMode, Limit: 100, Window: time.Minute},
				Retry:       shaper.RetryPolicy{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: time.Minute},
				Sink:        shaper.SinkSpec{NATS: &shaper.NATSSinkSpec{Subject: "erp.orders", Request: true, Timeout: 5 * time.Second}},
				DeadLetter:  "shaper.dead.legacy-erp",
				DeadLetters: shaper.DeadLetterLimits{MaxAge: 168 * time.Hour, MaxCount: 10000},
				Breaker:     on,
				Outcomes:    settings.Outcomes{Keep: 24 * time.Hour, ResultBytes: 64 << 10, MaxRecords: 100000},
				Policies:    shaper.Policies{MaxCost: 1, Priorities: 1, MaxDelay: 24 * time.Hour},
			},
			{
				Name: "printer", Rate: 2, Concurrency: 1, Capacity: 10, MaxWait: 5 * time.Minute,
				Admission: &limiter.Config{Mode: limiter.TokenBucketMode, Rate: 1, Burst: 5},
				Retry:     shaper.RetryPolicy{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: time.Minute},
				Sink: shaper.SinkSpec{HTTP: &shaper.HTTPSinkSpec{URL: "http://127.0.0.1:8080/print", Method: "POST",
					Timeout: 10 * time.Second, Headers: http.Header{"X-Api-Key": {"secret-key"}}}},
				DeadLetter:  "shaper.dead.printer",
				DeadLetters: shaper.DeadLetterLimits{MaxAge: 24 * time.Hour, MaxCount: 500},
				Breaker:     on,
				Outcomes:    settings.Outcomes{Keep: 24 * time.Hour, ResultBytes: 64 << 10, MaxRecords: 100000},
				Policies:    shaper.Policies{MaxCost: 1, Priorities: 1, MaxDelay: 24 * time.Hour},
			},
		},
	}
	if got := cfg.ShaperSettings(); !reflect.DeepEqual(got, want) {
		t.Errorf("ShaperSettings() =\n%#v\nwant\n%#v", got, want)
	}
	if got := Defaults().ShaperSettings(); len(got.Lanes) != 0 || got.ShutdownGrace != 10*time.Second {
		t.Errorf("Defaults().ShaperSettings() = %+v", got)
	}
}

func TestRestartRequired(t *testing.T) {
	t.Parallel()
	base, err := LoadWith("testdata/full.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func(c *Config)
		want   []string
	}{
		{"same", func(*Config) {}, nil},
		{"rate and capacity apply in place", func(c *Config) {
			d := c.Downstreams["printer"]
			d.Rate, d.Queue.Capacity = 9, 99
			c.Downstreams["printer"] = d
		}, nil},
		{"dead letters apply in place", func(c *Config) {
			d := c.Downstreams["printer"]
			d.DeadLetter, d.DeadLetters = "dl.printer", DeadLetters{MaxAge: time.Hour, MaxCount: 5}
			c.Downstreams["printer"] = d
		}, nil},
		{"new downstream applies in place", func(c *Config) {
			c.Downstreams["scanner"] = c.Downstreams["printer"]
		}, nil},
		{"nats keys", func(c *Config) {
			c.NATS.URL = "nats://10.0.0.5:4222"
			c.NATS.Embedded.Listen = "127.0.0.1:4333"
			c.NATS.Password = "changed"
		}, []string{"nats.embedded.listen", "nats.password", "nats.url"}},
		{"listeners and subjects", func(c *Config) {
			c.Admin.Listen = "0.0.0.0:9090"
			c.Ingress.SubjectPrefix = "jobs"
			c.Ingress.QueueGroup = "other"
			c.Ingress.MaxPayload = 2 << 20 // in place
		}, []string{"admin.listen", "ingress.queue_group", "ingress.subject_prefix"}},
		{"admin auth and tls", func(c *Config) {
			c.Admin.BasicAuth = AdminBasicAuth{Username: "ops", PasswordHash: "$2a$10$x"}
			c.Admin.TLS.CertFile = "admin.crt"
		}, []string{"admin.basic_auth.password_hash", "admin.basic_auth.username", "admin.tls.cert_file"}},
		{"backend", func(c *Config) {
			d := c.Downstreams["legacy-erp"]
			d.Queue.Backend = "jetstream"
			c.Downstreams["legacy-erp"] = d
		}, []string{"downstreams.legacy-erp.queue.backend"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			next, _ := LoadWith("testdata/full.yaml", noEnv)
			tt.change(&next)
			if got := RestartRequired(base, next); !slices.Equal(got, tt.want) {
				t.Errorf("RestartRequired = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRedacted(t *testing.T) {
	t.Parallel()
	cfg, err := LoadWith("testdata/full.yaml", Options{Environ: []string{
		"SHAPER_NATS_URL=nats://alice:hunter2@10.0.0.5:4222",
		"SHAPER_NATS_USER=alice",
		"SHAPER_NATS_PASSWORD=hunter2",
		"SHAPER_ADMIN_BASIC_AUTH_USERNAME=ops",
		"SHAPER_ADMIN_BASIC_AUTH_PASSWORD_HASH=$2a$10$bQ54WnuLwH/t/HFN0qzCZuN7EnIxb9CPAfLrsCF/3MTnLwwD/jwbi",
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Redacted()
	eq(t, r.NATS.Password, "REDACTED")
	eq(t, r.NATS.Token, "")
	eq(t, r.Admin.BasicAuth.PasswordHash, "REDACTED")
	eq(t, r.Downstreams["printer"].Sink.HTTP.Headers["x-api-key"], "REDACTED")
	eq(t, cfg.Downstreams["printer"].Sink.HTTP.Headers["x-api-key"], "secret-key") // the original is untouched
	eq(t, cfg.NATS.Password, "hunter2")
	for _, s := range []string{cfg.String(), fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), cfg.NATS.String(), fmt.Sprintf("%v", cfg.NATS)} {
		if strings.Contains(s, "hunter2") || strings.Contains(s, "secret-key") || strings.Contains(s, "bQ54Wnu") {
			t.Errorf("leaks a secret:\n%s", s)
		}
	}
	for _, line := range []string{
		"nats.url: nats://REDACTED@10.0.0.5:4222",
		"nats.password: REDACTED",
		"admin.basic_auth.username: ops",
		"admin.basic_auth.password_hash: REDACTED",
		"downstreams.printer.rate: 2/s",
		"downstreams.printer.sink.http.headers.x-api-key: REDACTED",
	} {
		if !strings.Contains(cfg.String()+"\n", line+"\n") {
			t.Errorf("String() lacks %q:\n%s", line, cfg.String())
		}
	}
}

func TestValidateProgrammatic(t *testing.T) {
	t.Parallel()
	c := Defaults()
	d := DefaultDownstream()
	d.Rate, d.Queue.Capacity, d.Queue.Backend = 2, 10, BackendMemory
	d.Sink.HTTP = &HTTPSink{URL: "http://h/", Method: "POST", Timeout: time.Second}
	c.Downstreams = map[string]Downstream{"ok": d}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	d.Rate = 2e6
	d.Admission = &Admission{Mode: "fixed_window", Limit: 10}
	c.Downstreams["bad name"] = d
	want := `downstreams.bad name: "bad name" is not a downstream name; use letters, digits, - and _`
	if err := c.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate:\n%v\nwant\n%s", err, want)
	}
	delete(c.Downstreams, "bad name")
	c.Downstreams["ok"] = d
	want = `downstreams.ok.admission.window: must be 1ms..24h, got 0s (env SHAPER_DOWNSTREAMS_OK_ADMISSION_WINDOW)
downstreams.ok.rate: must be 1/h..1000000/s, got 2000000/s (env SHAPER_DOWNSTREAMS_OK_RATE)`
	if err := c.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate:\n%v\nwant\n%s", err, want)
	}
}

// FuzzLoad: any bytes as a config file give a valid Config or an error,
// never a panic, and a Config that Load accepts passes Validate.
func FuzzLoad(f *testing.F) {
	for _, name := range []string{"full", "minimal", "multi", "truncated", "secrets", "two_sinks", "admission_limits", "admission_limits_bad_item", "admission_limits_count"} {
		data, err := os.ReadFile("testdata/" + name + ".yaml")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("downstreams: {a: {rate: 1/s, queue: {capacity: 1}, sink: {nats: {subject: x}}}}"))
	f.Add([]byte("downstreams: [1, 2]"))
	f.Add([]byte("nats: 5\nadmin: {listen: [a]}"))
	f.Add([]byte(":\n\t- {"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := LoadWith(path, noEnv)
		if err != nil {
			if !reflect.DeepEqual(cfg, Config{}) {
				t.Fatalf("non-zero Config with error %v", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Load accepted a config that Validate refuses: %v", err)
		}
		_ = cfg.ShaperSettings()
		_ = cfg.String()
	})
}
