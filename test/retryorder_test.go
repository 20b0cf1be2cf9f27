package test

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// A retried job goes ahead of newer jobs on either backend, with one
// priority level too: a job whose first try fails is tried again (after
// its 100 ms backoff, well before the next start at 2/s) before the jobs
// published behind it, although on jetstream those were fetched while it
// waited out its backoff in the stream.
func TestRetryAheadOfNewerJobs(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"memory", "jetstream"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			srv := runNATS(t)
			ds := newDownstream(t)
			ds.respond = func(n int, r *http.Request) (int, map[string]string) {
				if r.Header.Get("Shaper-Attempt") == "1" && n == 1 {
					return http.StatusInternalServerError, nil
				}
				return http.StatusOK, nil
			}
			in := startDaemon(t, srv, baseConfig(fmt.Sprintf(`
  api:
    rate: 2/s
    retry: { max_attempts: 3, initial_backoff: 100ms }
    queue: { capacity: 100, backend: %s }
    sink:
      http: { url: %q, timeout: 2s }
`, backend, ds.URL)))
			bodies := []string{"FAIL", "ok-0", "ok-1", "ok-2"}
			for _, b := range bodies {
				if r := in.request(t, "shaper.jobs.api", []byte(b), nil); r.Status != "accepted" {
					t.Fatalf("%s: %+v", b, r)
				}
			}
			hits := ds.waitHits(t, 5, 20*time.Second)
			var got []string
			for _, h := range hits {
				got = append(got, fmt.Sprintf("%s/%d", h.body, h.attempt))
			}
			want := []string{"FAIL/1", "FAIL/2", "ok-0/1", "ok-1/1", "ok-2/1"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("starts %v, want %v: the retry ahead of the newer jobs", got, want)
			}
		})
	}
}
