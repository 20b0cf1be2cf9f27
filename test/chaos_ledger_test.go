package test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// chaosReply is one answer a producer got for an id (or its loss).
type chaosReply struct {
	status    string // accepted, rejected, or "" when no reply came
	reason    string
	jobID     string
	duplicate bool
}

// chaosLedger records, for each Nats-Msg-Id, every answer its producer got.
type chaosLedger struct {
	mu      sync.Mutex
	replies map[string][]chaosReply
	sends   int
}

func (lg *chaosLedger) add(id string, r chaosReply) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.replies[id] = append(lg.replies[id], r)
	lg.sends++
}

func (lg *chaosLedger) snapshot() map[string][]chaosReply {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	out := make(map[string][]chaosReply, len(lg.replies))
	for id, rs := range lg.replies {
		out[id] = append([]chaosReply(nil), rs...)
	}
	return out
}

// chaosProducers send jobs with Nats-Msg-Ids by request/reply, each over
// one of conns (one connection per NATS node, so that NATS mostly hands a
// request to the daemon on that node), and retry an id whose reply was
// lost or `unavailable` as producer.SubmitRetry does, over a connection
// picked again: often another daemon. Some accepted ids are sent once more
// a little later, as a producer that lost its reply would, to exercise the
// duplicate answers.
type chaosProducers struct {
	lg      *chaosLedger
	conns   []*nats.Conn
	subject string
	wg      sync.WaitGroup
	stop    chan struct{}
}

const (
	chaosMaxTries  = 30                     // per send of an id
	chaosResend    = 0.15                   // share of accepted ids sent once more
	chaosReplyWait = 2 * time.Second        // a request's timeout
	chaosGap       = 150 * time.Millisecond // mean pause between a worker's new ids
)

// run starts workers goroutines; each draws from its own generator,
// seeded from seed.
func (p *chaosProducers) run(workers int, seed uint64) {
	for w := range workers {
		rng := rand.New(rand.NewPCG(seed, uint64(w)+1))
		p.wg.Go(func() { p.worker(w, rng) })
	}
}

func (p *chaosProducers) worker(w int, rng *rand.Rand) {
	var resends sync.WaitGroup
	defer resends.Wait()
	for seq := 1; ; seq++ {
		select {
		case <-p.stop:
			return
		case <-time.After(time.Duration((0.5 + rng.Float64()) * float64(chaosGap))):
		}
		id := fmt.Sprintf("chaos-%d-%d", w, seq)
		if p.send(id, rng) && rng.Float64() < chaosResend {
			after := time.Duration(rng.Float64() * float64(3*time.Second))
			conn := rng.Uint64()
			resends.Go(func() {
				time.Sleep(after)
				p.send(id, rand.New(rand.NewPCG(conn, 0)))
			})
		}
	}
}

// send submits id until it is answered accepted (true), refused for good,
// or chaosMaxTries are used; every answer goes to the ledger.
func (p *chaosProducers) send(id string, rng *rand.Rand) bool {
	wait := 100 * time.Millisecond
	for range chaosMaxTries {
		nc := p.conns[rng.IntN(len(p.conns))]
		m := nats.NewMsg(p.subject)
		m.Data = []byte(id)
		m.Header.Set("Nats-Msg-Id", id)
		resp, err := nc.RequestMsg(m, chaosReplyWait)
		var r reply
		if err == nil {
			err = json.Unmarshal(resp.Data, &r)
		}
		p.lg.add(id, chaosReply{status: r.Status, reason: r.Reason, jobID: r.JobID, duplicate: r.Duplicate})
		switch {
		case err == nil && r.Status == "accepted":
			return true
		case err == nil && r.Reason != "unavailable":
			return false
		case err == nil && r.RetryAfter > 0:
			wait = time.Duration(r.RetryAfter) * time.Second
		}
		time.Sleep(time.Duration((0.5 + rng.Float64()) * float64(wait)))
		wait = min(2*wait, time.Second)
	}
	return false
}
