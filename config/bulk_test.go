package config

import (
	"strings"
	"testing"
)

// ingress.bulk is validated key by key, each error naming what is valid.
func TestValidateBulk(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		set  func(*Config)
		want string // "" = valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"off", func(c *Config) { c.Ingress.Bulk.SubjectPrefix = "" }, ""},
		{"wildcard", func(c *Config) { c.Ingress.Bulk.SubjectPrefix = "bulk.*" },
			`ingress.bulk.subject_prefix: "bulk.*" is not a NATS subject without wildcards`},
		{"under intake", func(c *Config) { c.Ingress.Bulk.SubjectPrefix = "shaper.jobs.bulk" },
			`ingress.bulk.subject_prefix: "shaper.jobs.bulk" overlaps ingress.subject_prefix "shaper.jobs", so bulk requests would be taken as jobs; use another subject, e.g. shaper.bulk`},
		{"status", func(c *Config) { c.Ingress.Bulk.SubjectPrefix = "shaper.status" },
			`ingress.bulk.subject_prefix: "shaper.status" overlaps ingress.status_prefix "shaper.status"; bulk requests need subjects of their own, e.g. shaper.bulk`},
		{"no jobs", func(c *Config) { c.Ingress.Bulk.MaxJobs = 0 }, "ingress.bulk.max_jobs: must be 1..10000, got 0"},
		{"too many jobs", func(c *Config) { c.Ingress.Bulk.MaxJobs = 10001 }, "ingress.bulk.max_jobs: must be 1..10000, got 10001"},
		{"too large", func(c *Config) { c.Ingress.Bulk.MaxBytes = 65 << 20 }, "ingress.bulk.max_bytes: must be 1B..64MiB, got 65MiB"},
		{"below one job", func(c *Config) { c.Ingress.MaxPayload = 2 << 20; c.Ingress.Bulk.MaxBytes = 1 << 20 },
			"ingress.bulk.max_bytes: 1MiB is less than ingress.max_payload 2MiB, so a request could not carry one job of the largest size; raise it to at least 2MiB"},
	} {
		cfg := Defaults()
		cfg.Downstreams = map[string]Downstream{}
		c.set(&cfg)
		err := cfg.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: Validate: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: Validate: %v\nwant an error containing %s", c.name, err, c.want)
		}
	}
}

// The bulk keys load from the environment like any other.
func TestBulkFromEnv(t *testing.T) {
	t.Parallel()
	cfg, err := LoadWith("testdata/minimal.yaml", Options{Environ: []string{
		"SHAPER_INGRESS_BULK_MAX_JOBS=250", "SHAPER_INGRESS_BULK_MAX_BYTES=2MiB", "SHAPER_INGRESS_BULK_SUBJECT_PREFIX=imports",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if b := cfg.Ingress.Bulk; b != (Bulk{SubjectPrefix: "imports", MaxJobs: 250, MaxBytes: 2 << 20}) {
		t.Errorf("ingress.bulk = %+v", b)
	}
}
