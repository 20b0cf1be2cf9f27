package test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Copies of one Nats-Msg-Id that arrive together are queued once, also
// when the admission decision is a NATS KV round trip (store: nats) on a
// memory queue, where answers come from goroutines of their own: 20 ids ×
// 16 concurrent copies → exactly 20 deliveries, and every copy is answered
// accepted with its id's one job id.
func TestDedupeConcurrentCopies(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"memory", "nats"} {
		t.Run(store, func(t *testing.T) {
			srv := runNATS(t)
			ds := newDownstream(t)
			in := startDaemon(t, srv, baseConfig(lane("erp", "1000/s", 10000, `    concurrency: 16
    admission: { mode: token_bucket, rate: 1000/s, burst: 1000, store: `+store+` }
`, ds.URL)))
			const ids, copies = 20, 16
			var mu sync.Mutex
			jobIDs := map[string]map[string]bool{} // msg id → job ids answered
			var wg sync.WaitGroup
			for i := range ids {
				for range copies {
					wg.Go(func() {
						msgID := fmt.Sprintf("order-%d", i)
						m := nats.NewMsg("shaper.jobs.erp")
						m.Header.Set("Nats-Msg-Id", msgID)
						m.Data = []byte(msgID)
						resp, err := in.nc.RequestMsg(m, 10*time.Second)
						if err != nil {
							t.Errorf("request %s: %v", msgID, err)
							return
						}
						if s := resp.Header.Get("Shaper-Status"); s != "accepted" {
							t.Errorf("%s: %s %s", msgID, s, resp.Data)
							return
						}
						mu.Lock()
						defer mu.Unlock()
						if jobIDs[msgID] == nil {
							jobIDs[msgID] = map[string]bool{}
						}
						var body struct {
							JobID string `json:"job_id"`
						}
						if err := json.Unmarshal(resp.Data, &body); err != nil || body.JobID == "" {
							t.Errorf("%s: reply %s: %v", msgID, resp.Data, err)
						}
						jobIDs[msgID][body.JobID] = true
					})
				}
			}
			wg.Wait()
			ds.waitHits(t, ids, 10*time.Second)
			time.Sleep(500 * time.Millisecond) // a copy queued twice would be delivered by now
			if hits := ds.snapshot(); len(hits) != ids {
				t.Errorf("%d deliveries for %d ids × %d copies, want exactly %d", len(hits), ids, copies, ids)
			}
			for id, jobs := range jobIDs {
				if len(jobs) != 1 {
					t.Errorf("%s: copies were answered with %d job ids, want one", id, len(jobs))
				}
			}
			if n := in.metric(t, `shaper_jobs_duplicate_total`); n != ids*(copies-1) {
				t.Errorf("shaper_jobs_duplicate_total = %v, want %d", n, ids*(copies-1))
			}
		})
	}
}

// An id whose first job was rejected is not remembered, and not left
// claimed either: the same Nats-Msg-Id sent again after a rate_limited
// rejection (what a retrying producer does) gets an answer of its own, and
// is accepted once the key's token has refilled.
func TestDedupeRetryAfterRejection(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in := startDaemon(t, srv, baseConfig(lane("erp", "100/s", 100, `    admission: { mode: token_bucket, rate: 2/s, burst: 1 }
`, ds.URL)))
	h := map[string]string{"Shaper-Key": "acme"}
	if r := in.request(t, "shaper.jobs.erp", nil, h); r.Status != "accepted" {
		t.Fatalf("first job: %+v", r)
	}
	h["Nats-Msg-Id"] = "order-7"
	r := in.request(t, "shaper.jobs.erp", nil, h)
	if r.Status != "rejected" || r.Reason != "rate_limited" {
		t.Fatalf("second job: %+v, want rate_limited", r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for r = in.request(t, "shaper.jobs.erp", nil, h); r.Status != "accepted"; r = in.request(t, "shaper.jobs.erp", nil, h) {
		if r.Reason != "rate_limited" || time.Now().After(deadline) {
			t.Fatalf("retry of order-7: %+v, want accepted within 10s", r)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r.Duplicate {
		t.Errorf("retry of order-7 accepted as a duplicate: %+v; the rejected first copy must not be remembered", r)
	}
}
