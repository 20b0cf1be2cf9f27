package jetstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// A batch the server refused for a Nats-Msg-Id it holds does not say
// which: the refusal names no id and no sequence. The id's job may still
// be in the stream, so it has no record yet (a record is written when a
// job leaves, recordwrite.go), and no look-up can tell. So each id of the
// batch is probed: a message with the id and an invalid Nats-Rollup value
// (probeRollup) is sent to the job's subject. The server checks the id
// before the rollup, and refuses an invalid rollup whatever the stream's
// settings, so a probe is never stored: an id it holds is answered with
// the PubAck of a duplicate, naming the original's sequence (so its job
// id, as Offer's duplicate answers are); any other id with the rollup's
// refusal. (nats-server 2.12+: stream.go processJetStreamMsgWithBatch,
// the dedupe check before the rollup check; clustered,
// checkMsgHeadersPreClusteredProposal in jetstream_batching.go, the
// same order, before anything is proposed.) The probes are pipelined
// like any store; the batch is then sent again without the duplicates.

// Probes of a Nats-Msg-Id.
const (
	hdrRollup   = "Nats-Rollup"
	probeRollup = "shaperd-probe" // no rollup: the server refuses it
	// errCodeRollupFailed is the server's refusal of the probe's rollup:
	// the probed id is not held.
	errCodeRollupFailed = 10111
	// originalReads bounds the reads of the originals' job ids under way
	// at once.
	originalReads = 16
)

// probeResult is the answer to the probe of job i's Nats-Msg-Id.
type probeResult struct {
	i   int
	pa  pubAck
	err error
}

// findDuplicates probes the Nats-Msg-Id of every job of the batch the
// server refused, answers those it holds as duplicates with their
// originals' job ids, and sends the rest again. It runs in its own
// goroutine.
func (b *atomicBatch) findDuplicates() {
	var dups []probeResult
	var stored []uint64
	var failed error
	for _, r := range b.probe() {
		var apiErr *natsjs.APIError
		switch {
		case r.err == nil && r.pa.duplicate:
			dups = append(dups, r)
		case r.err == nil: // stored: a server that ignored the invalid rollup
			stored = append(stored, r.pa.seq)
		case errors.As(r.err, &apiErr) && apiErr.ErrorCode == errCodeRollupFailed:
			// not held
		case errors.As(r.err, &apiErr) && apiErr.ErrorCode == errCodeDuplicateInFlux:
			// another store of the id is in flight: probed again if the batch is refused again
		default:
			failed = r.err
		}
	}
	switch {
	case len(stored) > 0:
		b.q.dropProbes(stored)
		b.done(nil, fmt.Errorf("stream %s stored %d probes of a Nats-Msg-Id (deleted since): "+
			"the server does not refuse an invalid Nats-Rollup as nats-server 2.12 does", b.q.stream, len(stored)))
		return
	case failed != nil:
		b.done(nil, fmt.Errorf("store %d jobs in stream %s as one batch: it was refused for a Nats-Msg-Id held already, "+
			"and looking for it failed: %w", len(b.idx), b.q.stream, b.q.refused(failed)))
		return
	case len(dups) == 0:
		// The id's store was in flight, or its window ended since: try
		// again after a pause (no answer of the server says when).
		time.Sleep(recordPoll)
	}
	b.originals(dups)
	b.send()
}

// probe sends the probe of each Nats-Msg-Id of the batch last sent and
// returns their answers.
func (b *atomicBatch) probe() []probeResult {
	ch := make(chan probeResult, len(b.idx))
	n := 0
	for k, i := range b.idx {
		id := b.jobs[i].DedupeID
		if id == "" {
			continue
		}
		n++
		m := &nats.Msg{Subject: b.subjects[k], Header: nats.Header{hdrMsgID: {id}, hdrRollup: {probeRollup}}}
		reply := func(pa pubAck, err error) { ch <- probeResult{i: i, pa: pa, err: err} }
		if err := b.q.st.pub.publish(m, pendingPub{q: b.q, reply: reply}); err != nil {
			ch <- probeResult{i: i, err: err}
		}
	}
	results := make([]probeResult, n)
	for k := range results {
		results[k] = <-ch
	}
	return results
}

// originals answers the jobs of dups as duplicates, each with its
// original's job id: the stored original's (the PubAck's sequence) or its
// record's, read as Offer's duplicate answers are; originalReads at once.
func (b *atomicBatch) originals(dups []probeResult) {
	sem := make(chan struct{}, originalReads)
	var wg sync.WaitGroup
	for _, r := range dups {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			b.duplicate(r.i, b.q.st.originalWithin(pendingPub{q: b.q, job: b.jobs[r.i]}, r.pa.seq, "duplicate Nats-Msg-Id in an atomic batch"))
		})
	}
	wg.Wait()
}

// originalWithin reads the job id of the original of p's job, stored at
// seq, trying for up to duplicateWait; "" (never another's) when it is
// known nowhere by then, which it logs with what (the duplicate's kind)
// and attrs.
func (st *Store) originalWithin(p pendingPub, seq uint64, what string, attrs ...any) string {
	// A pause between tries, not a wait for an event: a try that found
	// nothing had its reads fail (lost in a leader election, say), and no
	// answer of the server says when to read again.
	for until := time.Now().Add(duplicateWait); ; time.Sleep(recordPoll) {
		if jobID, ok := st.originalID(p, seq); ok {
			return jobID
		}
		if time.Now().After(until) {
			st.log.Warn(what+" whose original job id is known nowhere; answered without a job id",
				append([]any{"downstream", p.q.name, "stream", p.q.stream}, attrs...)...)
			return ""
		}
	}
}

// dropProbes deletes the probes the stream stored at seqs (never, on a
// server that refuses their rollup), so that none is taken for a job.
func (q *Queue) dropProbes(seqs []uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	s := q.streamHandle()
	if s == nil {
		var err error
		if s, err = q.st.js.Stream(ctx, q.stream); err != nil {
			q.st.log.Error("jetstream probes of a Nats-Msg-Id stored and not deleted: the drain will deliver empty jobs",
				"downstream", q.name, "stream", q.stream, "sequences", seqs, "error", err.Error())
			return
		}
	}
	for _, seq := range seqs {
		if err := s.DeleteMsg(ctx, seq); err != nil && !gone(err) {
			q.st.log.Error("jetstream probe of a Nats-Msg-Id stored and not deleted: the drain will deliver an empty job",
				"downstream", q.name, "stream", q.stream, "sequence", seq, "error", err.Error())
		}
	}
}
