package jetstream

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/shaperd/shaper/queue"
)

// Headers the queue stores with each job.
const (
	hdrJobID    = "Shaper-Job-Id"
	hdrDeadline = "Shaper-Deadline" // unix nanoseconds; absent = none
	hdrEnqueued = "Shaper-Enqueued" // unix nanoseconds
	hdrKey      = "Shaper-Key"      // the admission key (per-key concurrency); absent = ""
	hdrCost     = "Shaper-Cost"     // the job's cost (its drain time); absent = 1
	// hdrPriority is the producer's Shaper-Priority (0 = the most urgent);
	// absent = the least urgent level.
	hdrPriority  = "Shaper-Priority"
	hdrNotBefore = "Shaper-Not-Before" // a delayed job's instant, unix nanoseconds; absent = ready
	hdrMsgID     = nats.MsgIdHdr       // the producer's id: the stream dedupes on it
	// hdrReplyTo is where the job's outcome is published once it ends,
	// by whichever instance ends it; absent = nowhere.
	hdrReplyTo = "Shaper-Reply-To"
)

// encode builds the message that stores job on subject. A job without an
// ID is named by its place once stored (see name.go): its message carries
// no Shaper-Job-Id.
func encode(subject string, job *queue.Job) *nats.Msg {
	m := &nats.Msg{Subject: subject, Data: job.Payload, Header: make(nats.Header, len(job.Header)+4)}
	for k, v := range job.Header {
		m.Header[k] = v
	}
	if job.ID != "" {
		m.Header[hdrJobID] = []string{job.ID}
	}
	m.Header[hdrEnqueued] = []string{strconv.FormatInt(job.Enqueued.UnixNano(), 10)}
	if !job.Deadline.IsZero() {
		m.Header[hdrDeadline] = []string{strconv.FormatInt(job.Deadline.UnixNano(), 10)}
	}
	if job.DedupeID != "" {
		m.Header[hdrMsgID] = []string{job.DedupeID}
	}
	if job.Key != "" {
		m.Header[hdrKey] = []string{job.Key}
	}
	if job.Cost > 1 {
		m.Header[hdrCost] = []string{strconv.Itoa(job.Cost)}
	}
	if job.Priority > 0 {
		m.Header[hdrPriority] = []string{strconv.Itoa(job.Priority - 1)}
	}
	if !job.NotBefore.IsZero() {
		m.Header[hdrNotBefore] = []string{strconv.FormatInt(job.NotBefore.UnixNano(), 10)}
	}
	if job.ReplyTo != "" {
		m.Header[hdrReplyTo] = []string{job.ReplyTo}
	}
	return m
}

// decode rebuilds the job stored in m for lane, named under epoch when
// its message carries no id (see name.go). Tries already made (the
// delivery count minus this one) count as failures; the fetcher takes the
// deliveries that were not tries (the ledger) off them.
func decode(m natsjs.Msg, lane, epoch string) *queue.Job {
	var seq uint64
	var at time.Time
	if j, ok := m.(*jobMsg); ok {
		seq, at = j.seq(), j.job.Time
	}
	md, err := m.Metadata()
	if err == nil && seq == 0 {
		seq, at = md.Sequence.Stream, md.Timestamp
	}
	job := decodeStored(m.Headers(), m.Data(), lane, epoch, seq, at)
	if err == nil {
		job.Attempt = int(md.NumDelivered) - 1
		job.Failures = job.Attempt
	}
	return job
}

// decodeStored rebuilds the job stored at seq, at, with headers h and
// payload data, for lane: its id is its Shaper-Job-Id, else its name under
// epoch.
func decodeStored(h nats.Header, data []byte, lane, epoch string, seq uint64, at time.Time) *queue.Job {
	job := &queue.Job{Downstream: lane, Payload: data, ID: h.Get(hdrJobID), Key: h.Get(hdrKey)}
	if job.ID == "" {
		job.ID, job.Named = nameOf(epoch, seq), epoch != ""
	}
	job.Enqueued = unixNano(h.Get(hdrEnqueued))
	if job.Enqueued.IsZero() {
		job.Enqueued = at
	}
	job.Deadline = unixNano(h.Get(hdrDeadline))
	if c, err := strconv.Atoi(h.Get(hdrCost)); err == nil && c > 1 {
		job.Cost = c
	}
	if p, err := strconv.Atoi(h.Get(hdrPriority)); err == nil && p >= 0 {
		job.Priority = p + 1
	}
	job.NotBefore = unixNano(h.Get(hdrNotBefore))
	job.ReplyTo = h.Get(hdrReplyTo)
	for k, v := range h {
		if isOurs(k) {
			continue
		}
		if job.Header == nil {
			job.Header = make(http.Header, len(h))
		}
		job.Header[k] = v
	}
	return job
}

func isOurs(name string) bool {
	l := strings.ToLower(name)
	return strings.HasPrefix(l, "shaper-") || strings.HasPrefix(l, "nats-")
}

func unixNano(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, n)
}
