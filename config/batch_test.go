package config

import (
	"slices"
	"testing"
	"time"

	"github.com/shaperd/shaper/shaper/settings"
)

// The batch keys load from the file, with max_bytes 1MiB and encoding
// json_array where absent, and reach the shaper's settings; a downstream
// without batch has none.
func TestBatchLoad(t *testing.T) {
	t.Parallel()
	c, err := LoadWith("testdata/batch.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	lanes := c.ShaperSettings().Lanes
	get := func(name string) settings.Batch {
		return lanes[slices.IndexFunc(lanes, func(l settings.Lane) bool { return l.Name == name })].Batch
	}
	eq(t, get("erp"), settings.Batch{MaxJobs: 100, MaxBytes: 2 << 20, Linger: 200 * time.Millisecond, Encoding: "ndjson"})
	eq(t, get("printer"), settings.Batch{MaxJobs: 10, MaxBytes: 1 << 20, Encoding: "json_array"})
	eq(t, get("mail"), settings.Batch{})

	c, err = LoadWith("testdata/batch.yaml", Options{Environ: []string{"SHAPER_DOWNSTREAMS_ERP_BATCH_MAX_JOBS=500"}})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, c.Downstreams["erp"].Batch.MaxJobs, 500)
}

// Each bad batch value stops the load naming the key and what is valid.
func TestBatchInvalid(t *testing.T) {
	t.Parallel()
	_, err := LoadWith("testdata/batch_bad.yaml", noEnv)
	want := `downstreams.a.batch.encoding: unknown encoding "xml": want json_array, ndjson or multipart (env SHAPER_DOWNSTREAMS_A_BATCH_ENCODING)
downstreams.a.batch.linger: must be 0s..10s, got 11s (env SHAPER_DOWNSTREAMS_A_BATCH_LINGER)
downstreams.a.batch.max_jobs: must be 2..10000, got 1 (env SHAPER_DOWNSTREAMS_A_BATCH_MAX_JOBS)
downstreams.b.batch.linger: must be 0s..10s, got -1s (env SHAPER_DOWNSTREAMS_B_BATCH_LINGER)
downstreams.b.batch.max_bytes: must be 1B..64MiB, got 65MiB (env SHAPER_DOWNSTREAMS_B_BATCH_MAX_BYTES)
downstreams.b.batch.max_jobs: must be 2..10000, got 10001 (env SHAPER_DOWNSTREAMS_B_BATCH_MAX_JOBS)
downstreams.c.batch.max_job: unknown key; valid keys here: max_jobs, max_bytes, linger, encoding
downstreams.c.batch.max_jobs: must be 2..10000, got 0 (env SHAPER_DOWNSTREAMS_C_BATCH_MAX_JOBS)`
	if err == nil || err.Error() != want {
		t.Errorf("err:\n%v\nwant:\n%s", err, want)
	}
}
