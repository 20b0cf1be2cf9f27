package daemon

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/config"
	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/bulk"
	"github.com/shaperd/shaper/shaper/dedupe"
	"github.com/shaperd/shaper/shaper/producer"
)

// hdrBulkAtomic asks for all or nothing.
const hdrBulkAtomic = producer.HeaderBulkAtomic

// bulkLimit is what a bulk request is checked against.
type bulkLimit struct {
	prefix   string // subject prefix with the trailing dot; "" = bulk intake off
	maxJobs  int
	maxBytes int
}

func bulkLimits(b config.Bulk) bulkLimit {
	if !b.On() {
		return bulkLimit{}
	}
	return bulkLimit{prefix: b.SubjectPrefix + ".", maxJobs: b.MaxJobs, maxBytes: int(b.MaxBytes)}
}

// subscribeBulk subscribes bulk intake, in the intake's queue group: a
// subscription of its own, so bulk requests are read on a goroutine of
// their own, beside single jobs.
func (d *Daemon) subscribeBulk(nc *nats.Conn, in *intake, cfg config.Config) (*nats.Subscription, error) {
	subject := cfg.Ingress.Bulk.SubjectPrefix + ".>"
	sub, err := nc.QueueSubscribe(subject, cfg.Ingress.QueueGroup, in.handleBulk)
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", subject, err)
	}
	// A request's body is bounded by max_bytes: bound what may wait by
	// bytes, so a burst of large requests is dropped (counted) rather
	// than held without bound.
	if err := sub.SetPendingLimits(4096, 256<<20); err != nil {
		return nil, fmt.Errorf("bulk subscription limits: %w", err)
	}
	return sub, nil
}

// bulkRequest is one bulk request on its way: every job's receipt, and
// the reply sent once the last one is in.
type bulkRequest struct {
	in         *intake
	msg        *nats.Msg
	downstream string
	atomic     bool
	jobs       []*queue.Job // nil where the job could not be read

	mu   sync.Mutex
	rcs  []shaper.Receipt
	left int
}

// handleBulk takes one bulk request: each job as if it had been sent
// alone, or all or none (Shaper-Bulk-Atomic), answered once.
func (in *intake) handleBulk(msg *nats.Msg) {
	now := time.Now()
	lim := in.limits()
	downstream, ok := strings.CutPrefix(msg.Subject, lim.bulk.prefix)
	if !ok || downstream == "" || strings.Contains(downstream, ".") {
		in.refuseBulk(msg, unknownDownstream, shaper.ReasonUnknownDownstream, fmt.Errorf(
			"subject %q names no downstream; send bulk requests to %s<downstream>", truncate(msg.Subject, 128), lim.bulk.prefix))
		return
	}
	if _, known := in.known(downstream); !known {
		in.refuseBulk(msg, unknownDownstream, shaper.ReasonUnknownDownstream, fmt.Errorf(
			"downstream %q is not configured; send bulk requests to %s<downstream> for a configured one", truncate(downstream, 128), lim.bulk.prefix))
		return
	}
	if len(msg.Data) > lim.bulk.maxBytes {
		in.refuseBulk(msg, downstream, shaper.ReasonPayloadTooLarge, fmt.Errorf(
			"bulk request of %d bytes is over ingress.bulk.max_bytes of %d bytes; send fewer jobs a request", len(msg.Data), lim.bulk.maxBytes))
		return
	}
	hdr := http.Header(msg.Header)
	atomic, err := parseAtomic(hdr)
	if err != nil {
		in.refuseBulk(msg, downstream, shaper.ReasonBadRequest, err)
		return
	}
	items, err := bulk.Parse(msg.Data, lim.bulk.maxJobs)
	if err != nil {
		in.refuseBulk(msg, downstream, shaper.ReasonBadRequest, fmt.Errorf("bulk request: %w", err))
		return
	}
	in.metrics.bulkJobs.WithLabelValues(downstream).Observe(float64(len(items)))
	b := &bulkRequest{in: in, msg: msg, downstream: downstream, atomic: atomic,
		jobs: make([]*queue.Job, len(items)), rcs: make([]shaper.Receipt, len(items)), left: len(items)}
	b.read(now, lim, hdr, items)
}

// read turns every job object into a job and takes it, each alone or
// all or none.
func (b *bulkRequest) read(now time.Time, lim intakeLimits, hdr http.Header, items []bulk.Job) {
	defaults := jobDefaults(hdr)
	bad := make([]*rejection, len(items))
	msgIDs := make([]string, len(items))
	firstBad := -1
	for i, it := range items {
		if it.Err != nil {
			bad[i] = &rejection{reason: shaper.ReasonBadRequest, err: it.Err}
			b.jobs[i] = &queue.Job{Downstream: b.downstream, Payload: it.Data}
		} else {
			b.jobs[i], msgIDs[i], bad[i] = parseJob(now, lim, lim.prefix+b.downstream, jobHeader(defaults, it.Headers, lim.keyHeader), bytes.Clone(it.Data))
			if bad[i] != nil && bad[i].err != nil {
				bad[i].err = fmt.Errorf("job %d: %w", i, bad[i].err)
			}
		}
		if bad[i] != nil && firstBad < 0 {
			firstBad = i
		}
	}
	if b.atomic && firstBad >= 0 {
		b.refuseAll(firstBad, bad[firstBad])
		return
	}
	var take []int // indexes of the jobs that go to the shaper
	for i, job := range b.jobs {
		switch {
		case bad[i] != nil:
			b.in.jobs.Received(b.downstream)
			b.in.jobs.Rejected(b.downstream, string(bad[i].reason))
			b.done(i, shaper.Receipt{Downstream: b.downstream, Reason: bad[i].reason, RetryAfter: bad[i].retryAfter, Err: bad[i].err})
		case msgIDs[i] == "" || b.claim(now, i, msgIDs[i]):
			job.DedupeID = msgIDs[i]
			take = append(take, i)
		}
	}
	b.submit(now, take, msgIDs)
}

// claim claims job i's message id and reports whether the job goes on to
// the shaper: a duplicate is answered as one, and a copy of a job on its
// way (in this request or another) gets that job's answer when it comes.
func (b *bulkRequest) claim(now time.Time, i int, msgID string) bool {
	jobID, c := b.in.dedupe.Claim(now, msgID, func(rc shaper.Receipt) { b.copyOf(i, rc) })
	switch c {
	case dedupe.Duplicate:
		b.copyOf(i, shaper.Receipt{Accepted: true, JobID: jobID})
	case dedupe.Busy:
		b.in.jobs.Received(b.downstream)
		b.in.jobs.Rejected(b.downstream, string(shaper.ReasonUnavailable))
		b.done(i, shaper.Receipt{Downstream: b.downstream, Reason: shaper.ReasonUnavailable, RetryAfter: maxWaitingRetry,
			Err: fmt.Errorf("job %d: %d copies of message ids are already waiting for their first copy's answer, so this one was not taken; retry in %s",
				i, dedupe.MaxWaiting, maxWaitingRetry)})
	}
	return c == dedupe.First
}

// copyOf answers job i, a copy of an earlier job, with that job's answer:
// a duplicate of an accepted one, the same rejection for a rejected one.
func (b *bulkRequest) copyOf(i int, rc shaper.Receipt) {
	rc.Downstream = b.downstream
	if rc.Accepted {
		b.in.metrics.duplicates.Inc()
		rc.Duplicate, rc.Position, rc.ETA, rc.NotBefore = true, 0, 0, time.Time{}
	} else {
		b.in.jobs.Received(b.downstream)
		b.in.jobs.Rejected(b.downstream, string(rc.Reason))
	}
	b.done(i, rc)
}

// submit offers the jobs at take to the shaper, settling each one's
// message id with its receipt.
func (b *bulkRequest) submit(now time.Time, take []int, msgIDs []string) {
	if len(take) == 0 {
		return
	}
	jobs := make([]*queue.Job, len(take))
	for k, i := range take {
		jobs[k] = b.jobs[i]
	}
	settle := func(k int, rc shaper.Receipt) {
		i := take[k]
		if msgIDs[i] != "" {
			b.in.dedupe.Settle(now, msgIDs[i], rc)
		}
		b.done(i, rc)
	}
	if !b.atomic {
		b.in.shaper.SubmitEach(jobs, settle)
		return
	}
	b.in.shaper.SubmitAll(jobs, func(rcs []shaper.Receipt) {
		for k, rc := range rcs {
			settle(k, rc)
		}
	})
}

// refuseAll refuses every job of an all-or-nothing request because job
// failed could not be read: that job with its reason, the others naming
// it. Each is counted as a rejected job.
func (b *bulkRequest) refuseAll(failed int, rej *rejection) {
	for i := range b.jobs {
		b.in.jobs.Received(b.downstream)
		b.in.jobs.Rejected(b.downstream, string(rej.reason))
		err := rej.err
		if i != failed {
			err = &shaper.NotQueuedError{Failed: failed, Reason: rej.reason}
		}
		b.done(i, shaper.Receipt{Downstream: b.downstream, Reason: rej.reason, RetryAfter: rej.retryAfter, Err: err})
	}
}

// done books job i's receipt; the last one sends the reply. A rejected
// job of a plain publish is dead-lettered as a single one would be.
func (b *bulkRequest) done(i int, rc shaper.Receipt) {
	if !rc.Accepted {
		b.in.logCause(b.jobs[i], rc.Reason, rc.Err)
		if b.msg.Reply == "" {
			b.in.deadLetter(b.jobs[i], rc.Reason, rc.Err)
		}
	}
	b.mu.Lock()
	b.rcs[i] = rc
	b.left--
	last := b.left == 0
	b.mu.Unlock()
	if last {
		b.reply()
	}
}

// reply counts the request and answers it.
func (b *bulkRequest) reply() {
	accepted := 0
	for _, rc := range b.rcs {
		if rc.Accepted {
			accepted++
		}
	}
	status := bulkStatus(accepted, len(b.rcs))
	b.in.metrics.bulkRequests.WithLabelValues(b.downstream, status).Inc()
	if b.msg.Reply == "" {
		return
	}
	b.in.respond(b.msg, bulkReply(b.msg.Reply, b.downstream, status, accepted, b.atomic, b.rcs))
}

// refuseBulk answers a request that cannot be read at all: no job of it
// is taken, so none is counted in the single-job series.
func (in *intake) refuseBulk(msg *nats.Msg, label string, reason shaper.Reason, err error) {
	in.metrics.bulkRequests.WithLabelValues(label, "rejected").Inc()
	in.log.Debug("bulk request rejected", "subject", truncate(msg.Subject, 128), "reason", string(reason), "err", err)
	in.respond(msg, rejectedReply(msg.Reply, reason, 0, err))
}

// parseAtomic reads Shaper-Bulk-Atomic: absent or false, or true.
func parseAtomic(hdr http.Header) (bool, error) {
	vals := hdr.Values(hdrBulkAtomic)
	switch {
	case len(vals) == 0:
		return false, nil
	case len(vals) == 1 && strings.EqualFold(vals[0], "true"):
		return true, nil
	case len(vals) == 1 && (strings.EqualFold(vals[0], "false") || vals[0] == ""):
		return false, nil
	}
	return false, fmt.Errorf("header %s %q is not valid; write true (all or nothing) or false", hdrBulkAtomic, truncate(strings.Join(vals, ","), 32))
}

// jobDefaults is the request's headers every job starts from: all but
// the bulk request's own.
func jobDefaults(hdr http.Header) http.Header {
	out := make(http.Header, len(hdr))
	for name, vals := range hdr {
		if !strings.EqualFold(name, hdrBulkAtomic) {
			out[name] = vals
		}
	}
	return out
}

// jobHeader is one job's headers: the request's defaults, each one the
// job names (in any case) replaced by the job's value. The names the
// daemon reads (the protocol's, the key header, Content-Type) are taken
// in any case; the others are kept as written (a NATS downstream may
// look for traceparent in lower case).
func jobHeader(defaults http.Header, own map[string]string, keyHeader string) http.Header {
	if len(own) == 0 {
		return defaults
	}
	out := make(http.Header, len(defaults)+len(own))
	for name, vals := range defaults {
		out[name] = vals
	}
	for name, v := range own {
		for d := range out {
			if strings.EqualFold(d, name) {
				delete(out, d)
			}
		}
		if isProtocolHeader(name, keyHeader) || strings.EqualFold(name, "Content-Type") {
			name = http.CanonicalHeaderKey(name) // read by the intake or a sink: in the form they look for
		}
		out[name] = []string{v}
	}
	return out
}
