package config

import (
	"testing"
	"time"

	"github.com/shaperd/shaper/shaper/admission"
)

// One testdata file per admission.store failure, with its exact message.
func TestAdmissionStoreFailures(t *testing.T) {
	t.Parallel()
	tests := []struct{ file, want string }{
		{"admission_store_bad", `downstreams.printer.admission.store: "redis" is not an admission store; use memory (this process) or nats (a JetStream KV bucket shared by every instance) (env SHAPER_DOWNSTREAMS_PRINTER_ADMISSION_STORE)`},
		{"admission_fail_closed_memory", `downstreams.printer.admission.approximate: is only used with admission.store nats; remove it, or set store: nats (env SHAPER_DOWNSTREAMS_PRINTER_ADMISSION_APPROXIMATE)
downstreams.printer.admission.fail_closed: is only used with admission.store nats; remove it, or set store: nats (env SHAPER_DOWNSTREAMS_PRINTER_ADMISSION_FAIL_CLOSED)`},
		{"admission_approximate_window", `downstreams.printer.admission.approximate: is supported by modes token_bucket and gcra, not sliding_log; remove it, or change the mode (env SHAPER_DOWNSTREAMS_PRINTER_ADMISSION_APPROXIMATE)`},
		{"admission_bucket_bad", `nats.jetstream.admission_bucket: "shaper.admission" is not a KV bucket name; use 1..64 letters, digits, - and _, e.g. SHAPER_ADMISSION (env SHAPER_NATS_JETSTREAM_ADMISSION_BUCKET)
nats.jetstream.admission_timeout: must be 10ms..10s, got 1m (env SHAPER_NATS_JETSTREAM_ADMISSION_TIMEOUT)`},
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

// admission.store nats and its policies reach the shaper's settings; env
// overrides them; memory (or absent) is the zero AdmissionStore.
func TestAdmissionStoreSettings(t *testing.T) {
	t.Parallel()
	cfg, err := LoadWith("testdata/admission_nats.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if j := cfg.NATS.JetStream; j.AdmissionBucket != "RATES" || j.AdmissionTimeout != 100*time.Millisecond {
		t.Fatalf("jetstream %+v", j)
	}
	want := admission.Store{Kind: "nats", FailClosed: true, Approximate: true}
	if got := cfg.ShaperSettings().Lanes[0].AdmissionStore; got != want {
		t.Fatalf("AdmissionStore %+v, want %+v", got, want)
	}
	cfg, err = LoadWith("testdata/admission_nats.yaml", Options{Environ: []string{
		"SHAPER_DOWNSTREAMS_PRINTER_ADMISSION_STORE=memory",
		"SHAPER_DOWNSTREAMS_PRINTER_ADMISSION_FAIL_CLOSED=false",
		"SHAPER_DOWNSTREAMS_PRINTER_ADMISSION_APPROXIMATE=false",
		"SHAPER_NATS_JETSTREAM_ADMISSION_BUCKET=OTHER",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.ShaperSettings().Lanes[0].AdmissionStore; got != (admission.Store{}) {
		t.Fatalf("env store memory: AdmissionStore %+v, want zero", got)
	}
	if cfg.NATS.JetStream.AdmissionBucket != "OTHER" {
		t.Fatalf("env bucket: %q", cfg.NATS.JetStream.AdmissionBucket)
	}
	// The bucket is a nats.* key: a change needs a restart. The store of a
	// downstream changes in place (the shaper builds a new limiter).
	next := cfg
	next.NATS.JetStream.AdmissionBucket = "THIRD"
	if keys := RestartRequired(cfg, next); len(keys) != 1 || keys[0] != "nats.jetstream.admission_bucket" {
		t.Fatalf("RestartRequired = %v", keys)
	}
}
