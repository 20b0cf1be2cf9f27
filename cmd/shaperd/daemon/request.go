package daemon

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/outcome/natsout"
	"github.com/shaperd/shaper/shaper/producer"
)

// Short names for the job protocol's headers the daemon reads and writes;
// the names themselves are the producer package's.
const (
	hdrMaxWait = producer.HeaderMaxWait
	hdrCost    = producer.HeaderCost
	hdrMsgID   = producer.HeaderMsgID
	hdrStatus  = producer.HeaderStatus
	hdrReason  = producer.HeaderReason
	hdrError   = producer.HeaderError
	hdrRetry   = producer.HeaderRetryAfter
	hdrJobID   = producer.HeaderJobID
	hdrAttempt = producer.HeaderAttempt
	hdrReplyTo = producer.HeaderReplyTo
)

// Bounds on producer-controlled header values. A value past a bound is a
// bad_request, never truncated silently.
const (
	maxMaxWait  = 7 * 24 * time.Hour
	maxKeyBytes = 256
	maxIDBytes  = 256
)

// unknownDownstream is the metric label for jobs naming no configured
// downstream: label values never come from a message.
const unknownDownstream = "_unknown"

// intakeLimits are the checks applied to every message before it becomes a job.
type intakeLimits struct {
	prefix     string // subject prefix with the trailing dot
	keyHeader  string
	maxPayload int
	bulk       bulkLimit // bulk requests (bulk.go)
}

// rejection is an intake refusal with its reason, one of the protocol's.
type rejection struct {
	reason     shaper.Reason
	retryAfter time.Duration
	err        error
}

// parseJob turns one intake message, received at now, into a job. It
// looks only at bounded inputs and allocates nothing proportional to a
// rejected payload. now is the instant a Shaper-Delay counts from.
func parseJob(now time.Time, lim intakeLimits, subject string, hdr http.Header, data []byte) (*queue.Job, string, *rejection) {
	downstream, ok := strings.CutPrefix(subject, lim.prefix)
	if !ok || downstream == "" || strings.Contains(downstream, ".") {
		return nil, "", &rejection{reason: shaper.ReasonUnknownDownstream, err: fmt.Errorf("subject %q names no downstream; publish to %s<downstream>", truncate(subject, 128), lim.prefix)}
	}
	// stub carries what a rejection needs: the lane for labels and
	// dead-letter routing, and the payload for the dead letter.
	stub := &queue.Job{Downstream: downstream, Payload: data}
	if len(data) > lim.maxPayload {
		return stub, "", &rejection{reason: shaper.ReasonPayloadTooLarge, err: fmt.Errorf("payload of %d bytes for downstream %s is over ingress.max_payload of %d bytes; send a smaller payload", len(data), downstream, lim.maxPayload)}
	}
	key, err := headerValue(hdr, lim.keyHeader, maxKeyBytes)
	if err != nil {
		return stub, "", &rejection{reason: shaper.ReasonBadRequest, err: err}
	}
	msgID, err := headerValue(hdr, hdrMsgID, maxIDBytes)
	if err != nil {
		return stub, "", &rejection{reason: shaper.ReasonBadRequest, err: err}
	}
	maxWait, err := parseMaxWait(hdr.Get(hdrMaxWait))
	if err != nil {
		return stub, "", &rejection{reason: shaper.ReasonBadRequest, err: err}
	}
	cost, err := parseCost(hdr.Get(hdrCost))
	if err != nil {
		return stub, "", &rejection{reason: shaper.ReasonBadRequest, err: err}
	}
	sched, err := parseSchedule(now, hdr)
	if err != nil {
		return stub, "", &rejection{reason: shaper.ReasonBadRequest, err: err}
	}
	replyTo, err := parseReplyTo(hdr)
	if err != nil {
		return stub, "", &rejection{reason: shaper.ReasonBadRequest, err: err}
	}
	stub.Key, stub.Cost, stub.MaxWait, stub.ReplyTo = key, cost, maxWait, replyTo
	stub.Priority, stub.NotBefore = sched.priority, sched.notBefore
	stub.Header = passThrough(hdr, lim.keyHeader)
	return stub, msgID, nil
}

// headerValue returns the single value of a header, bounded in size and
// required to be valid UTF-8 (keys and ids are echoed in errors and logs).
func headerValue(hdr http.Header, name string, limit int) (string, error) {
	vals := hdr.Values(name)
	switch {
	case len(vals) == 0:
		return "", nil
	case len(vals) > 1:
		return "", fmt.Errorf("header %s is given %d times; send it once", name, len(vals))
	}
	v := vals[0]
	if len(v) > limit {
		return "", fmt.Errorf("header %s is %d bytes; at most %d are allowed", name, len(v), limit)
	}
	if !utf8.ValidString(v) {
		return "", fmt.Errorf("header %s is not valid UTF-8", name)
	}
	return v, nil
}

// parseReplyTo reads Shaper-Reply-To: absent, or one publish subject
// (natsout.ValidReplyTo).
func parseReplyTo(hdr http.Header) (string, error) {
	vals := hdr.Values(hdrReplyTo)
	switch {
	case len(vals) == 0 || vals[0] == "" && len(vals) == 1:
		return "", nil
	case len(vals) > 1:
		return "", fmt.Errorf("header %s is given %d times; send it once", hdrReplyTo, len(vals))
	}
	if err := natsout.ValidReplyTo(vals[0]); err != nil {
		return "", fmt.Errorf("header %w", err)
	}
	return vals[0], nil
}

// parseMaxWait parses Shaper-Max-Wait: empty means absent; zero, negative,
// unparsable or above 7 days is an error.
func parseMaxWait(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	if len(v) > 64 {
		return 0, fmt.Errorf("header %s is %d bytes long: %w", hdrMaxWait, len(v), errMaxWait)
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > maxMaxWait {
		return 0, fmt.Errorf("header %s %q is not valid: %w", hdrMaxWait, v, errMaxWait)
	}
	return d, nil
}

// maxCost bounds Shaper-Cost before the lane's own queue.max_cost applies.
const maxCost = 1000000

// parseCost parses Shaper-Cost: empty means 1; otherwise a whole number
// 1..1000000 (the lane refuses one above its queue.max_cost).
func parseCost(v string) (int, error) {
	if v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxCost {
		return 0, fmt.Errorf("header %s %q is not valid: write a whole number 1..%d (bounded by the downstream's queue.max_cost)", hdrCost, truncate(v, 32), maxCost)
	}
	return n, nil
}

// passThrough keeps the producer's headers that a downstream may want
// (Content-Type and the like) and drops the job protocol's own.
func passThrough(hdr http.Header, keyHeader string) http.Header {
	var out http.Header
	for name, vals := range hdr {
		if isProtocolHeader(name, keyHeader) {
			continue
		}
		if out == nil {
			out = make(http.Header, len(hdr))
		}
		out[name] = vals
	}
	return out
}

func isProtocolHeader(name, keyHeader string) bool {
	return strings.HasPrefix(strings.ToLower(name), "shaper-") ||
		strings.HasPrefix(strings.ToLower(name), "nats-") ||
		strings.EqualFold(name, keyHeader)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
