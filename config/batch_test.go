package config

import (
	"os"
	"path/filepath"
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

// queue.placement reaches a jetstream lane's settings; it is refused on a
// memory queue, and when it names nothing.
func TestPlacement(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "p.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`
downstreams:
  erp:
    rate: 2/s
    queue: { capacity: 10, backend: jetstream, placement: { cluster: home, tags: [region:eu] } }
    sink: { http: { url: "http://127.0.0.1:8080/x" } }
`)
	c, err := LoadWith(path, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if p := c.ShaperSettings().Lanes[0].Placement; p == nil || p.Cluster != "home" || len(p.Tags) != 1 || p.Tags[0] != "region:eu" {
		t.Fatalf("placement %+v", p)
	}
	write(`
downstreams:
  a:
    rate: 2/s
    queue: { capacity: 10, backend: memory, placement: { cluster: home } }
    sink: { http: { url: "http://127.0.0.1:8080/x" } }
  b:
    rate: 2/s
    queue: { capacity: 10, placement: {} }
    sink: { http: { url: "http://127.0.0.1:8080/x" } }
`)
	_, err = LoadWith(path, noEnv)
	want := `downstreams.a.queue.placement.cluster: queue.placement places a jetstream queue's stream; remove it, or set queue.backend: jetstream (env SHAPER_DOWNSTREAMS_A_QUEUE_PLACEMENT_CLUSTER)
downstreams.b.queue.placement.cluster: queue.placement names no cluster and no tags; write e.g. { cluster: eu-west } or remove it (env SHAPER_DOWNSTREAMS_B_QUEUE_PLACEMENT_CLUSTER)`
	if err == nil || err.Error() != want {
		t.Errorf("err:\n%v\nwant:\n%s", err, want)
	}
}
