package deadletter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/shaper/producer"
)

// Headers the store reads or strips.
const (
	hdrReason       = producer.HeaderReason
	hdrMsgSize      = "Nats-Msg-Size"        // set by a headers-only consumer: the payload's size
	hdrExpectStream = "Nats-Expected-Stream" // set by Put; not the producer's
)

// listBatch is how many headers one fetch of List asks for.
const listBatch = 256

// List returns downstream's dead letters matching f, oldest first, without
// payloads (Size says how large each is), and how many match in all
// (ignoring f.Limit). It reads the stream's headers through an ordered
// consumer up to the last sequence stored when it was called, so dead
// letters stored meanwhile are not listed.
func (d *Store) List(ctx context.Context, downstream string, f Filter) ([]Stored, int, error) {
	ds, s, err := d.stream(ctx, downstream)
	if err != nil {
		return nil, 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list dead letters of %s: %w", downstream, err)
	}
	st := info.State
	if st.Msgs == 0 || f.After >= st.LastSeq {
		return nil, 0, nil
	}
	c, err := s.OrderedConsumer(ctx, natsjs.OrderedConsumerConfig{
		DeliverPolicy:     natsjs.DeliverByStartSequencePolicy,
		OptStartSeq:       max(f.After+1, st.FirstSeq),
		HeadersOnly:       true,
		InactiveThreshold: 30 * time.Second, // in case the delete below is lost
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list dead letters of %s: %w", downstream, err)
	}
	defer func() {
		if info := c.CachedInfo(); info != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			_ = d.js.DeleteConsumer(dctx, ds.name, info.Name)
			cancel()
		}
	}()
	// Without a filter the stream's count is the total: no need to read
	// past the limit to count.
	l := lister{f: f, last: st.LastSeq, counted: f.Reason == "" && f.After == 0 && f.Limit > 0}
	if err := l.run(c); err != nil {
		return nil, 0, fmt.Errorf("list dead letters of %s: %w", downstream, err)
	}
	total := l.matched
	if l.counted {
		total = int(st.Msgs)
	}
	return l.out, total, nil
}

// lister collects one List.
type lister struct {
	f       Filter
	last    uint64 // stop after this sequence
	counted bool   // the total is the stream's count: stop at the limit
	out     []Stored
	matched int  // matches read
	done    bool // the last sequence was read
}

func (l *lister) run(c natsjs.Consumer) error {
	for !l.done {
		batch, err := c.FetchNoWait(listBatch)
		if err != nil {
			return err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			l.take(m)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, natsjs.ErrNoMessages) {
			return err
		}
		if n == 0 || (l.counted && len(l.out) >= l.f.Limit) {
			break
		}
	}
	return nil
}

// take books one listed message.
func (l *lister) take(m natsjs.Msg) {
	md, err := m.Metadata()
	if err != nil || l.done {
		return
	}
	seq := md.Sequence.Stream
	if seq > l.last {
		l.done = true
		return
	}
	if seq == l.last || md.NumPending == 0 {
		l.done = true
	}
	h := m.Headers()
	if l.f.Reason != "" && h.Get(hdrReason) != l.f.Reason {
		return
	}
	l.matched++
	if l.f.Limit > 0 && len(l.out) >= l.f.Limit {
		return
	}
	size, _ := strconv.Atoi(h.Get(hdrMsgSize))
	l.out = append(l.out, Stored{Seq: seq, Time: md.Timestamp, Header: stripped(h), Size: size})
}

// stripped copies h without the headers the store or the listing added.
func stripped(h nats.Header) nats.Header {
	out := make(nats.Header, len(h))
	for k, v := range h {
		if k != hdrMsgSize && k != hdrExpectStream {
			out[k] = v
		}
	}
	return out
}

// Get returns one dead letter with its payload, or ErrNotFound.
func (d *Store) Get(ctx context.Context, downstream string, seq uint64) (Stored, error) {
	_, s, err := d.stream(ctx, downstream)
	if err != nil {
		return Stored{}, err
	}
	if seq == 0 {
		return Stored{}, fmt.Errorf("%w: downstream %s: sequences start at 1", ErrNotFound, downstream)
	}
	raw, err := s.GetMsg(ctx, seq)
	switch {
	case errors.Is(err, natsjs.ErrMsgNotFound):
		return Stored{}, fmt.Errorf("%w: downstream %s holds no dead letter %d", ErrNotFound, downstream, seq)
	case err != nil:
		return Stored{}, fmt.Errorf("get dead letter %d of %s: %w", seq, downstream, err)
	}
	return Stored{Seq: raw.Sequence, Time: raw.Time, Header: stripped(raw.Header), Data: raw.Data, Size: len(raw.Data)}, nil
}
