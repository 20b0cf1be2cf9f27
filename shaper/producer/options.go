package producer

import (
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// Option sets one header of a job, or one setting of SubmitRetry. Options
// apply in order; a later one for the same header wins.
type Option func(*job)

// job is one submission being built: its headers and, for SubmitRetry, how
// to retry it.
type job struct {
	key   string // sent in the client's key header; "" = none
	hdr   nats.Header
	retry retrySettings
}

// Key sets the admission key (tenant, API key) in the client's key header,
// Shaper-Key unless KeyHeader says otherwise. "" sends none: jobs without a
// key share one admission bucket. At most 256 bytes of UTF-8.
func Key(key string) Option { return func(j *job) { j.key = key } }

// MsgID sets Nats-Msg-Id: a repeated id within the daemon's
// ingress.dedupe_window (default 2m) is accepted once; the repeat gets the
// original job id and Result.Duplicate. An id whose job was rejected is not
// remembered. At most 256 bytes. SubmitRetry sets one itself when none is
// given.
func MsgID(id string) Option { return setHeader(HeaderMsgID, id) }

// MaxWait sets Shaper-Max-Wait to d as a Go duration ("30s"): the job is
// dropped as expired if it cannot start within d, overriding the
// downstream's queue.max_wait. shaperd refuses d ≤ 0 or d > 168h as
// bad_request.
func MaxWait(d time.Duration) Option { return setHeader(HeaderMaxWait, d.String()) }

// Cost sets Shaper-Cost: the job counts as n jobs for admission, queue
// capacity and drain time. shaperd refuses n < 1 or n above the
// downstream's queue.max_cost (default 1) as bad_request.
func Cost(n int) Option { return setHeader(HeaderCost, strconv.Itoa(n)) }

// ContentType sets Content-Type, which shaperd passes on to the downstream.
func ContentType(ct string) Option { return setHeader(HeaderContentType, ct) }

// Header adds value to the header name, sent as written (NATS headers are
// case-sensitive; shaperd reads its own in canonical form, as HTTP does).
// shaperd keeps headers other than its own (Shaper-*, Nats-*, the key
// header) with the job: a NATS sink passes them all on, an HTTP sink only
// Content-Type. Use the typed options for the protocol's headers.
func Header(name, value string) Option {
	return func(j *job) { j.hdr.Add(name, value) }
}

// Priority sets Shaper-Priority: the job's level, 0 the most urgent, up
// to the downstream's queue.priorities − 1 (a job without one is in the
// least urgent level). A start takes the most urgent ready job; equal
// levels keep FIFO order. shaperd refuses p outside 0..queue.priorities−1
// as bad_request; on a jetstream queue the level is stored with the job
// and survives a restart. A shaperd without
// priorities drops the header (like every Shaper- header) and queues the
// job in FIFO order.
func Priority(p int) Option { return setHeader(HeaderPriority, strconv.Itoa(p)) }

// Delay sets Shaper-Delay to d as a Go duration: the job is accepted at
// once, counts against the queue's capacity while it waits, and starts no
// earlier than d after shaperd received it, then paced like any other;
// its max wait counts from that instant. The reply's Result.NotBefore is
// the instant. shaperd refuses d < 0, d beyond the downstream's
// queue.max_delay (default 24h) and Delay together with NotBefore as
// bad_request; on a jetstream queue the instant is stored with the job
// and survives a restart. A shaperd
// without delays drops the header and starts the job in its turn.
func Delay(d time.Duration) Option { return setHeader(HeaderDelay, d.String()) }

// NotBefore sets Shaper-Not-Before to t in RFC 3339 (to the nanosecond):
// the job starts no earlier than t, as with Delay; a t already past is no
// delay. The same limits as Delay apply.
func NotBefore(t time.Time) Option {
	return setHeader(HeaderNotBefore, t.UTC().Format(time.RFC3339Nano))
}

// ReplyTo sets Shaper-Reply-To: once the job ends (succeeded, failed,
// expired or dropped) shaperd publishes its final outcome on subject:
// the downstream's answer body, with the headers Shaper-Job-Id,
// Shaper-State, Shaper-Attempt, Shaper-Status-Code (HTTP), Shaper-Error
// (when it did not succeed) and the answer's Content-Type. The accept
// reply still comes first, on the request's own reply subject. subject
// is a publish subject (no wildcards, no spaces or empty tokens, at most
// 256 bytes); shaperd refuses another as bad_request. On a jetstream
// queue the outcome is sent at least once, by whichever instance ends the
// job (again for a job delivered again after a crash), except by an
// instance that crashes while the record store is down: the job id tells
// repeats apart.
// SubmitAndWait sets it itself, to its own inbox.
func ReplyTo(subject string) Option { return setHeader(HeaderReplyTo, subject) }

func setHeader(name, value string) Option {
	return func(j *job) { j.hdr.Set(name, value) }
}
