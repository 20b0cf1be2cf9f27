package config

import (
	"testing"
	"time"

	"github.com/shaperd/shaper/shaper/policy"
)

// TestBreakerFailures asserts the exact messages for the breaker's keys.
func TestBreakerFailures(t *testing.T) {
	t.Parallel()
	_, err := LoadWith("testdata/breaker_bad.yaml", noEnv)
	want := `downstreams.api.breaker.failures: must be 0..1000, got -1 (env SHAPER_DOWNSTREAMS_API_BREAKER_FAILURES)
downstreams.api.breaker.open_for: must be 100ms..1h, got 10ms (env SHAPER_DOWNSTREAMS_API_BREAKER_OPEN_FOR)
downstreams.erp.breaker.max_open_for: must be breaker.open_for (1m)..24h, got 30s (env SHAPER_DOWNSTREAMS_ERP_BREAKER_MAX_OPEN_FOR)
downstreams.printer.breaker.max_open_for: must be breaker.open_for (5s)..24h, got 48h (env SHAPER_DOWNSTREAMS_PRINTER_BREAKER_MAX_OPEN_FOR)`
	if err == nil || err.Error() != want {
		t.Fatalf("error:\n%v\nwant:\n%s", err, want)
	}
}

// TestBreakerSettings: on by default with 5, 5s, 5m; failures 0 turns it
// off; env sets every key; the settings reach the shaper, and a change
// needs no restart.
func TestBreakerSettings(t *testing.T) {
	t.Parallel()
	cfg, err := LoadWith("testdata/minimal.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	on := policy.BreakerSettings{Failures: 5, OpenFor: 5 * time.Second, MaxOpenFor: 5 * time.Minute}
	if got := cfg.ShaperSettings().Lanes[0].Breaker; got != on {
		t.Errorf("default breaker %+v, want %+v", got, on)
	}
	off, err := LoadWith("testdata/minimal.yaml", Options{Environ: []string{"SHAPER_DOWNSTREAMS_PRINTER_BREAKER_FAILURES=0"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := off.ShaperSettings().Lanes[0].Breaker; got != (policy.BreakerSettings{}) {
		t.Errorf("breaker with failures 0: %+v, want off", got)
	}
	next, err := LoadWith("testdata/minimal.yaml", Options{Environ: []string{
		"SHAPER_DOWNSTREAMS_PRINTER_BREAKER_FAILURES=5", "SHAPER_DOWNSTREAMS_PRINTER_BREAKER_OPEN_FOR=2s",
		"SHAPER_DOWNSTREAMS_PRINTER_BREAKER_MAX_OPEN_FOR=1m",
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := policy.BreakerSettings{Failures: 5, OpenFor: 2 * time.Second, MaxOpenFor: time.Minute}
	if got := next.ShaperSettings().Lanes[0].Breaker; got != want {
		t.Errorf("breaker %+v, want %+v", got, want)
	}
	if keys := RestartRequired(cfg, next); keys != nil {
		t.Errorf("RestartRequired = %v, want nil (the breaker reloads)", keys)
	}
	if Defaults().NATS.JetStream.RatesBucket != "SHAPER_RATES" {
		t.Errorf("rates bucket default %q", Defaults().NATS.JetStream.RatesBucket)
	}
}

func TestRatesBucketFailure(t *testing.T) {
	t.Parallel()
	_, err := LoadWith("testdata/rates_bucket_bad.yaml", noEnv)
	want := `nats.jetstream.rates_bucket: "shaper.rates" is not a KV bucket name; use 1..64 letters, digits, - and _, e.g. SHAPER_RATES (env SHAPER_NATS_JETSTREAM_RATES_BUCKET)`
	if err == nil || err.Error() != want {
		t.Fatalf("error:\n%v\nwant:\n%s", err, want)
	}
}
