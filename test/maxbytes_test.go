package test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// queue.max_bytes bounds the payload bytes a queue holds, on both
// backends: with 256KiB, four jobs of 60KiB fit and the fifth is refused
// queue_full with an error naming queue.max_bytes; once the queue drains,
// jobs fit again.
func TestQueueMaxBytes(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"memory", "jetstream"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			srv := runNATS(t)
			ds := newDownstream(t)
			cfg := strings.Replace(baseConfig(lane("printer", "20/s", 100, "", ds.URL)),
				"backend: memory }", "backend: "+backend+", max_bytes: 256KiB }", 1) + "\ningress: { max_payload: 64KiB }\n"
			in := startDaemon(t, srv, cfg)
			in.do(t, http.MethodPost, "/v1/downstreams/printer/pause", http.StatusOK)
			payload := []byte(strings.Repeat("x", 60<<10))
			for i := range 4 {
				if r := in.request(t, "shaper.jobs.printer", payload, nil); r.Status != "accepted" {
					t.Fatalf("job %d of 60KiB under 256KiB: %+v", i+1, r)
				}
			}
			r := in.request(t, "shaper.jobs.printer", payload, nil)
			if r.Reason != "queue_full" || !strings.Contains(r.Error, "queue.max_bytes") {
				t.Fatalf("fifth job of 60KiB: %+v; want queue_full naming queue.max_bytes", r)
			}
			if r := in.request(t, "shaper.jobs.printer", []byte("small"), nil); r.Status != "accepted" {
				t.Fatalf("a small job that fits the bytes left: %+v", r)
			}
			in.do(t, http.MethodPost, "/v1/downstreams/printer/resume", http.StatusOK)
			ds.waitHits(t, 5, 10*time.Second)
			if r := in.request(t, "shaper.jobs.printer", payload, nil); r.Status != "accepted" {
				t.Fatalf("after the queue drained: %+v", r)
			}
		})
	}
}
