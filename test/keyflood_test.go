package test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A flood of distinct admission keys (1 000 000; 200 000 under -race):
// the limiter holds at most admission.max_keys of them, evicting the
// stalest, no metric series appears, and the heap stays flat.
//
// Not parallel: it measures the process's heap, which tests running beside
// it grow too (8 beside it once added 32 MiB).
func TestAdmissionKeyFlood(t *testing.T) {
	total := 1_000_000
	if raceEnabled {
		total = 200_000
	}
	const maxKeys, batch = 10_000, 10_000
	srv := runNATS(t)
	in := startDaemon(t, srv, `
nats: { url: "%NATS%" }
admin: { listen: "127.0.0.1:0" }
downstreams:
  api:
    rate: 1000000/s
    concurrency: 64
    queue: { capacity: 1000000, backend: memory }
    admission: { mode: token_bucket, rate: 1/s, burst: 5, max_keys: `+fmt.Sprint(maxKeys)+` }
    sink: { nats: { subject: flood.sink } }
    # The heap bound below is the limiter's: the jobs' records (bounded
    # by outcomes.max_records, tested on their own) would add theirs.
    outcomes: { keep: 0s }
`)
	series := in.seriesCount(t)
	before := heapInuse()
	start := time.Now()
	for sent := 0; sent < total; sent += batch {
		for i := sent; i < sent+batch; i++ {
			m := nats.NewMsg("shaper.jobs.api")
			m.Header.Set("Shaper-Key", fmt.Sprint("tenant-", i))
			if err := in.nc.PublishMsg(m); err != nil {
				t.Fatal(err)
			}
		}
		want := float64(sent + batch)
		waitFor(t, 60*time.Second, func() bool {
			return in.sumCounter(t, "shaper_jobs_received_total") >= want
		}, "intake to take the batch")
	}
	waitFor(t, 60*time.Second, func() bool {
		return in.metric(t, `shaper_queue_depth{downstream="api"}`) == 0
	}, "the queue to drain")
	var st struct {
		Downstreams []struct {
			Accepted      int `json:"accepted"`
			AdmissionKeys int `json:"admission_keys"`
			Evicted       int `json:"admission_keys_evicted"`
		} `json:"downstreams"`
	}
	if err := json.Unmarshal([]byte(in.get(t, "/v1/downstreams", 200)), &st); err != nil {
		t.Fatal(err)
	}
	lane := st.Downstreams[0]
	grew := int64(heapInuse()) - int64(before)
	t.Logf("%d distinct keys in %s: %d accepted, %d keys held (cap %d), %d evicted; heap in use %+d KiB; series %d before and after",
		total, time.Since(start).Round(time.Millisecond), lane.Accepted, lane.AdmissionKeys, maxKeys, lane.Evicted, grew>>10, series)
	if lane.Accepted != total {
		t.Errorf("%d accepted; every new key starts with a full bucket, so all %d should be", lane.Accepted, total)
	}
	if lane.AdmissionKeys > maxKeys || lane.AdmissionKeys == 0 {
		t.Errorf("%d keys held; the cap is %d", lane.AdmissionKeys, maxKeys)
	}
	if lane.Evicted == 0 {
		t.Error("no key was evicted: the flood never reached the cap")
	}
	if got := in.seriesCount(t); got != series {
		t.Errorf("series count %d after the flood, %d before: a key became a label", got, series)
	}
	if grew > 32<<20 {
		t.Errorf("heap grew %d MiB over the flood; the limiter's cap should bound it", grew>>20)
	}
}
