package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaper/limiter"
)

// One testdata file per admission.limits failure, with its exact message.
func TestLimitsFailures(t *testing.T) {
	t.Parallel()
	tests := []struct{ file, want string }{
		{"admission_limits_both", `downstreams.api.admission.limits: is set, and so is the single-limit form (admission.mode, admission.rate); keep one: move that limit into the list, or remove limits`},
		{"admission_limits_count", `downstreams.five.admission.limits: must hold 1..4 limits, got 5
downstreams.mapping.admission.limits: expected a list of limits, each a mapping with keys mode, rate, burst, limit, window, got a mapping
downstreams.none.admission.limits: must hold 1..4 limits, got 0`},
		{"admission_limits_bad_item", `downstreams.api.admission.limits[0].rate: "fast" is not a rate; write e.g. 2/s or 120/m
downstreams.api.admission.limits[1].limit: must be 1..1000000, got 0
downstreams.api.admission.limits[1].rate: is not used by mode fixed_window; remove it, or use mode token_bucket or gcra
downstreams.api.admission.limits[2]: expected a mapping with keys mode, rate, burst, limit, window, got "10/s"
downstreams.api.admission.limits[3].brust: unknown key; valid keys here: mode, rate, burst, limit, window
downstreams.api.admission.limits[3].mode: "leaky" is not an admission mode; use token_bucket, gcra, fixed_window, sliding_log or sliding_counter`},
		{"admission_limits_nats", `downstreams.api.admission.store: nats cannot hold admission.limits (a shared store cannot refund one limit when another rejects); use store: memory, or a single limit (env SHAPER_DOWNSTREAMS_API_ADMISSION_STORE)`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			_, err := LoadWith("testdata/"+tt.file+".yaml", noEnv)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error\n%v\nwant\n%s", err, tt.want)
			}
		})
	}
}

// admission.limits reach the shaper's settings as Limits (Admission nil);
// the rule's own keys (shadow) still take env; String lists each item.
func TestLimitsSettings(t *testing.T) {
	t.Parallel()
	cfg, err := LoadWith("testdata/admission_limits.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	ls := cfg.ShaperSettings().Lanes[0]
	want := []limiter.Config{
		{Mode: limiter.TokenBucketMode, Rate: 10, Burst: 10},
		{Mode: limiter.FixedWindowMode, Limit: 10000, Window: 24 * time.Hour},
	}
	if ls.Admission != nil || !reflect.DeepEqual(ls.Limits, want) || !ls.AdmissionShadow {
		t.Fatalf("Admission %+v, Limits %+v, AdmissionShadow %v; want nil, %+v, true", ls.Admission, ls.Limits, ls.AdmissionShadow, want)
	}
	for _, line := range []string{
		"downstreams.api.admission.limits[0].mode: token_bucket",
		"downstreams.api.admission.limits[0].rate: 10/s",
		"downstreams.api.admission.limits[1].window: 24h",
	} {
		if !strings.Contains(cfg.String(), line+"\n") {
			t.Errorf("String() lacks %q:\n%s", line, cfg)
		}
	}
	cfg, err = LoadWith("testdata/admission_limits.yaml", Options{Environ: []string{"SHAPER_DOWNSTREAMS_API_ADMISSION_SHADOW=false"}})
	if err != nil || cfg.ShaperSettings().Lanes[0].AdmissionShadow {
		t.Fatalf("env admission.shadow=false: %v", err)
	}
	if r := cfg.Redacted(); &r.Downstreams["api"].Admission.Limits[0] == &cfg.Downstreams["api"].Admission.Limits[0] {
		t.Error("Redacted shares the limits")
	}
}

// An env var cannot set a list item (viper maps env vars to key paths, and
// no path names an item). One that looks like it would is an error, not a
// silent no-op; so is the single form set by env next to a file's limits.
func TestLimitsEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"item key", []string{"SHAPER_DOWNSTREAMS_API_ADMISSION_LIMITS_0_RATE=5/s"}, `downstreams.api.admission.limits: cannot be set by env (SHAPER_DOWNSTREAMS_API_ADMISSION_LIMITS_0_RATE is set): a list item has no env var; write the limits in the config file, or unset it`},
		{"whole list", []string{"SHAPER_DOWNSTREAMS_API_ADMISSION_LIMITS=[{mode: gcra}]"}, `downstreams.api.admission.limits: cannot be set by env (SHAPER_DOWNSTREAMS_API_ADMISSION_LIMITS is set): a list item has no env var; write the limits in the config file, or unset it`},
		{"single form by env", []string{"SHAPER_DOWNSTREAMS_API_ADMISSION_MODE=gcra", "SHAPER_DOWNSTREAMS_API_ADMISSION_BURST=3"}, `downstreams.api.admission.limits: is set, and so is the single-limit form (admission.mode, admission.burst); keep one: move that limit into the list, or remove limits`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := LoadWith("testdata/admission_limits.yaml", Options{Environ: tt.env})
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error\n%v\nwant\n%s", err, tt.want)
			}
		})
	}
}

// The same through the process environment (viper's AutomaticEnv path).
func TestLimitsProcessEnv(t *testing.T) {
	t.Setenv("SHAPER_DOWNSTREAMS_API_ADMISSION_LIMITS_1_LIMIT", "5")
	_, err := Load("testdata/admission_limits.yaml")
	want := `downstreams.api.admission.limits: cannot be set by env (SHAPER_DOWNSTREAMS_API_ADMISSION_LIMITS_1_LIMIT is set): a list item has no env var; write the limits in the config file, or unset it`
	if err == nil || err.Error() != want {
		t.Fatalf("error\n%v\nwant\n%s", err, want)
	}
}
