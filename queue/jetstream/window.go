package jetstream

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// The window: the jobs a queue's drainer may start next, as tokens.
//
// A queue's jobs stay in its stream until they leave it (done, or dead-
// lettered); the drain never fetches the stream. The drainer promotes
// the jobs that go next, in the order (levels, then fairness between
// keys, FIFO within a key), by storing a token for each, a small message
// naming the job's stream sequence, in the window stream
// <StreamPrefix>_WINDOW on <SubjectPrefix>-window.D; one durable pull
// consumer per queue, pinned, delivers the tokens. A token is what the
// drain acks, naks with a retry's backoff or a delay, keeps alive and
// hands back: its deliveries are the job's tries, and a token not acked
// by a drainer that died is delivered to the next. The job leaves its
// stream (a delete) before its token is acked, so a token whose job is
// gone is acked and dropped.
const (
	windowSuffix    = "_WINDOW"
	windowSubjToken = "-window"
	hdrOrigin       = "Shaper-Origin" // a token's job: its sequence in the queue's stream
	// maxWindow bounds a queue's window; windowAhead is the drain it
	// covers at the lane's rate.
	maxWindow   = 1000
	windowAhead = time.Second
	// keyWindow is the least window under a per-key cap, so that the
	// drain can pass over a capped key's jobs.
	keyWindow = maxPrefetch
)

// WindowStream is the stream of every queue's window.
func (st *Store) WindowStream() string { return st.set.StreamPrefix + windowSuffix }

// windowSubject is downstream's window subject.
func (st *Store) windowSubject(downstream string) string {
	return st.set.SubjectPrefix + windowSubjToken + "." + downstream
}

// delayedSubject is the window subject of downstream's tokens of jobs
// waiting for their instant at level l: their counts are the delayed jobs
// by level, for every instance.
func (st *Store) delayedSubject(downstream string, l int) string {
	return st.windowSubject(downstream) + delayedToken + strconv.Itoa(l)
}

// delayedLevel is the level of a delayed token's subject under window (a
// downstream's window subject), or false for a ready token's.
func delayedLevel(window, subj string) (int, bool) {
	rest, ok := strings.CutPrefix(subj, window+delayedToken)
	if !ok {
		return 0, false
	}
	l, err := strconv.Atoi(rest)
	return l, err == nil && l >= 0
}

// leavingFor bounds a lane's jobs delivered and not yet gone from the
// stream (their record, delete or token ack outstanding): its
// concurrency, or 20 ms of drain at its rate when that is more, at least
// 2 (a start need not wait for the last job's delete) and at most 100.
// Past it no job starts (NextReady answers none), so that a store that
// cannot take the deletes stops the drain after that many jobs, which is
// what a crash then would deliver again.
func leavingFor(ls QueueSettings) int {
	ahead := int(math.Ceil(ls.Rate * leavingAhead.Seconds()))
	return min(max(ls.Concurrency, ahead, 2), maxLeaving)
}

// Bounds of leavingFor.
const (
	leavingAhead = 20 * time.Millisecond
	maxLeaving   = 100
)

// windowFor is a lane's window: its concurrency, or a second of drain at
// its rate when that is more, at most maxWindow.
func windowFor(ls QueueSettings) int {
	ahead := int(math.Ceil(ls.Rate * windowAhead.Seconds()))
	return min(max(ls.Concurrency, ahead, 1), maxWindow)
}

func (st *Store) windowConfig() natsjs.StreamConfig {
	storage := st.storage()
	return natsjs.StreamConfig{
		Name:        st.WindowStream(),
		Description: "shaperd windows: the jobs each queue's drainer starts next",
		Subjects:    []string{st.set.SubjectPrefix + windowSubjToken + ".>"},
		Retention:   natsjs.WorkQueuePolicy,
		Storage:     storage,
		Replicas:    st.set.Replicas,
		Duplicates:  st.set.DedupeWindow,
	}
}

// ensureWindow creates or finds the window stream, once per Store.
func (st *Store) ensureWindow(ctx context.Context) (natsjs.Stream, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.window != nil {
		return st.window, nil
	}
	want := st.windowConfig()
	rctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	s, err := st.js.Stream(rctx, want.Name)
	switch {
	case errors.Is(err, natsjs.ErrStreamNotFound):
		if s, err = st.js.CreateStream(rctx, want); err != nil {
			return nil, fmt.Errorf("create stream %s: %w", want.Name, err)
		}
	case err != nil:
		return nil, fmt.Errorf("look up stream %s: %w", want.Name, err)
	default:
		if errs := Unchangeable(s.CachedInfo().Config, want, ErrIncompatible, "tokens"); len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
	}
	st.window = s
	return s, nil
}

// ConsumerName is the durable name of downstream's consumer of its
// window (in WindowStream).
func (st *Store) ConsumerName(downstream string) string { return Consumer + "_" + downstream }

// windowConsumer is downstream's consumer of its window.
func (st *Store) windowConsumer(downstream string) natsjs.ConsumerConfig {
	return natsjs.ConsumerConfig{
		Durable:        st.ConsumerName(downstream),
		Description:    "shaperd drain of " + downstream + ": one pinned instance at a time",
		FilterSubjects: []string{st.windowSubject(downstream), st.windowSubject(downstream) + ".>"},
		AckPolicy:      natsjs.AckExplicitPolicy,
		AckWait:        st.set.AckWait,
		MaxDeliver:     -1, // shaperd terms a job after max_attempts (dead letter first)
		MaxAckPending:  -1, // retries and delays wait nak'ed; the window bounds the rest
		PriorityPolicy: natsjs.PriorityPolicyPinned,
		PinnedTTL:      st.set.PinnedTTL,
		PriorityGroups: []string{Group},
	}
}

// token is the message that promotes the job at seq of downstream into
// its window, on subject (the window's, or a delayed level's). Its
// Nats-Msg-Id is the job's (with suffix for a delayed job's second
// token, once due), so a promotion sent twice (by a second instance, or
// again after a restart) within the duplicate window is stored once.
func (st *Store) token(subject, downstream string, seq uint64, suffix string) *nats.Msg {
	s := strconv.FormatUint(seq, 10)
	m := nats.NewMsg(subject)
	m.Header.Set(hdrOrigin, s)
	m.Header.Set(nats.MsgIdHdr, downstream+":"+s+suffix)
	return m
}

// origin is the job sequence a token names.
func origin(t natsjs.Msg) (uint64, bool) {
	return parseDigits(t.Headers().Get(hdrOrigin))
}

// jobMsg is a job as the drain holds it: its token's delivery (acks,
// naks, progress, the delivery count: the embedded Msg) with the job's
// stored message (subject, headers, payload). Ack and Term are the
// token's: the job leaves its stream first (Queue.leave).
type jobMsg struct {
	natsjs.Msg
	job *natsjs.RawStreamMsg
}

func (j *jobMsg) Subject() string      { return j.job.Subject }
func (j *jobMsg) Headers() nats.Header { return j.job.Header }
func (j *jobMsg) Data() []byte         { return j.job.Data }

// seq is the job's sequence in its stream.
func (j *jobMsg) seq() uint64 { return j.job.Sequence }

// The API's answers for a message that is not in the stream: a get's,
// and a delete's. A delete of a message deleted already fails with the
// store's reason as its description (goneReasons).
const (
	errCodeNoMessage  = 10037 // no message found
	errCodeNoSequence = 10043 // sequence not found
)

// goneReasons are the store's reasons of a failed delete that say the
// message is not there: deleted already (by another instance, or by an
// earlier try whose answer was lost), or past the stream's last.
var goneReasons = []string{"no message found", "deleted message", "stream store EOF"}

// gone reports whether err says the message is not in the stream. A
// failed delete's API error comes as text only (ErrMsgDeleteUnsuccessful
// with the error's words), so its reason is read from there.
func gone(err error) bool {
	if errors.Is(err, natsjs.ErrMsgNotFound) {
		return true
	}
	var apiErr *natsjs.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == errCodeNoMessage || apiErr.ErrorCode == errCodeNoSequence
	}
	if !errors.Is(err, natsjs.ErrMsgDeleteUnsuccessful) {
		return false
	}
	msg := err.Error()
	if strings.Contains(msg, "err_code="+strconv.Itoa(errCodeNoSequence)+" ") {
		return true
	}
	return slices.ContainsFunc(goneReasons, func(r string) bool { return strings.HasSuffix(msg, "description="+r) })
}
