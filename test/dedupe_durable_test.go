package test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// requestMsgID sends payload to subject with Nats-Msg-Id msgID by
// request/reply and decodes the answer.
func requestMsgID(t *testing.T, nc *nats.Conn, subject, msgID, payload string) reply {
	t.Helper()
	m := nats.NewMsg(subject)
	m.Header.Set("Nats-Msg-Id", msgID)
	m.Data = []byte(payload)
	resp, err := nc.RequestMsg(m, 10*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", msgID, err)
	}
	var r reply
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		t.Fatalf("reply body %q: %v", resp.Data, err)
	}
	return r
}

// A producer whose reply was lost because the daemon died retries with
// the same Nats-Msg-Id: after the original was delivered and the daemon
// (with its embedded NATS server) was killed with -9 and restarted on the
// same store, the retry is answered duplicate with the original job id,
// and the downstream sees the job once.
func TestDurableDedupeAfterDeliveryAndKillNine(t *testing.T) {
	t.Parallel()
	ds := newDownstream(t)
	natsAddr, storeDir := freeAddr(t), filepath.Join(t.TempDir(), "nats")
	conf := fmt.Sprintf(`
nats:
  embedded: { listen: %q, store_dir: %q }
  jetstream: { ack_wait: 2s, pinned_ttl: 1s }
admin: { listen: "%%ADMIN%%" }
ingress: { dedupe_window: 2m }
shutdown_grace: 2s
downstreams:
  gateway:
    rate: 20/s
    queue: { capacity: 100, backend: jetstream }
    sink: { http: { url: %q, timeout: 2s } }
`, natsAddr, storeDir, ds.URL)
	p := startShaperd(t, conf)
	nc, err := nats.Connect("nats://" + natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	first := requestMsgID(t, nc, "shaper.jobs.gateway", "order-1", "payment-1")
	if first.Status != "accepted" || first.Duplicate || first.JobID == "" {
		t.Fatalf("first copy: %+v", first)
	}
	hits := ds.waitHits(t, 1, 10*time.Second)
	if hits[0].jobID != first.JobID {
		t.Fatalf("delivered job %s, accepted %s", hits[0].jobID, first.JobID)
	}
	waitFor(t, 10*time.Second, func() bool { return streamMsgs(t, nc, "gateway") == 0 }, "the delivered job acked")
	nc.Close()

	p.kill(t)
	startShaperd(t, conf)
	nc, err = nats.Connect("nats://" + natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	again := requestMsgID(t, nc, "shaper.jobs.gateway", "order-1", "payment-1")
	if again.Status != "accepted" || !again.Duplicate || again.JobID != first.JobID {
		t.Fatalf("retry after delivery, kill -9 and restart: %+v; want duplicate with job %s", again, first.JobID)
	}
	other := requestMsgID(t, nc, "shaper.jobs.gateway", "order-2", "payment-2")
	if other.Status != "accepted" || other.Duplicate {
		t.Fatalf("a new id after the restart: %+v, want accepted", other)
	}
	ds.waitHits(t, 2, 10*time.Second)
	time.Sleep(300 * time.Millisecond) // a retry queued again would be delivered by now (20/s)
	got := map[string]int{}
	for _, h := range ds.snapshot() {
		got[h.body]++
	}
	if got["payment-1"] != 1 || got["payment-2"] != 1 || len(got) != 2 {
		t.Fatalf("deliveries by payload %v, want each once", got)
	}
}

// Two daemons share a jetstream downstream: a copy of an id whose job was
// accepted (and delivered) through one is answered duplicate, with the
// original job id, through the other; and every job id any copy is
// answered with was issued to a job the downstream received, also when
// copies race through both daemons at once.
func TestDurableDedupeAcrossInstances(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	conf := baseConfig(durableLane("printer", "200/s", 1000, "", ds.URL))
	// Each daemon takes jobs on a subject of its own, so a copy goes
	// through the daemon the test means.
	a := startDaemon(t, srv, conf+"ingress: { subject_prefix: a.jobs }\n")
	b := startDaemon(t, srv, conf+"ingress: { subject_prefix: b.jobs }\n")

	first := a.request(t, "a.jobs.printer", []byte("x"), map[string]string{"Nats-Msg-Id": "order-1"})
	if first.Status != "accepted" || first.Duplicate {
		t.Fatalf("first copy: %+v", first)
	}
	ds.waitHits(t, 1, 10*time.Second)
	waitFor(t, 10*time.Second, func() bool { return streamMsgs(t, a.nc, "printer") == 0 }, "the delivered job acked")
	again := b.request(t, "b.jobs.printer", []byte("x"), map[string]string{"Nats-Msg-Id": "order-1"})
	if again.Status != "accepted" || !again.Duplicate || again.JobID != first.JobID {
		t.Fatalf("copy through the other daemon after delivery: %+v; want duplicate with job %s", again, first.JobID)
	}

	const ids = 40
	var mu sync.Mutex
	answered := map[string]map[string]bool{} // msg id → job ids answered
	var wg sync.WaitGroup
	for i := range ids {
		for _, prefix := range []string{"a", "b", "a", "b"} {
			wg.Go(func() {
				msgID := fmt.Sprintf("race-%d", i)
				r := requestMsgID(t, a.nc, prefix+".jobs.printer", msgID, msgID)
				if r.Status != "accepted" {
					t.Errorf("%s: %+v", msgID, r)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if answered[msgID] == nil {
					answered[msgID] = map[string]bool{}
				}
				answered[msgID][r.JobID] = true
			})
		}
	}
	wg.Wait()
	ds.waitHits(t, 1+ids, 10*time.Second)
	time.Sleep(500 * time.Millisecond) // a copy queued twice would be delivered by now
	delivered := map[string]string{}   // job id → payload
	perPayload := map[string]int{}
	for _, h := range ds.snapshot() {
		delivered[h.jobID] = h.body
		perPayload[h.body]++
	}
	for msgID, jobs := range answered {
		if perPayload[msgID] != 1 {
			t.Errorf("%s delivered %d times, want once", msgID, perPayload[msgID])
		}
		if len(jobs) != 1 {
			t.Errorf("%s: copies answered with %d job ids %v, want one", msgID, len(jobs), jobs)
		}
		for id := range jobs {
			if delivered[id] != msgID {
				t.Errorf("%s: answered job id %q, which no delivered job of that id carries", msgID, id)
			}
		}
	}
}
