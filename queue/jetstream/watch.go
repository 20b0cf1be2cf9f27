package jetstream

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// watchEvery is how often the watch of the records stream expires records,
// notices a reconnection, and checks a catch-up.
const watchEvery = 250 * time.Millisecond

// startRecords ensures the records stream and starts its watch, once: an
// ordered consumer that delivers every record in the stream (those of the
// window: the stream's max age drops the rest) and then each new one into
// st.table. It is a no-op once the watch runs.
func (st *Store) startRecords(ctx context.Context) error {
	st.watchMu.Lock()
	defer st.watchMu.Unlock()
	if st.watching || st.stopped {
		return nil
	}
	s, err := st.ensureRecords(ctx)
	if err != nil {
		return err
	}
	cons, err := s.OrderedConsumer(ctx, natsjs.OrderedConsumerConfig{DeliverPolicy: natsjs.DeliverAllPolicy})
	if err != nil {
		return fmt.Errorf("watch stream %s: %w", st.recordStream(), err)
	}
	cc, err := cons.Consume(st.onRecord, natsjs.ConsumeErrHandler(func(natsjs.ConsumeContext, error) {
		st.table.setCaughtUp(false) // the tick checks the catch-up again
	}))
	if err != nil {
		return fmt.Errorf("watch stream %s: %w", st.recordStream(), err)
	}
	st.watching = true
	st.watchWG.Go(func() { st.watch(s, cc) })
	return nil
}

// Stop ends the records' watch (it starts with the first Ensure or drain
// that needs it) and waits for it; none starts after. Idempotent.
func (st *Store) Stop() error {
	st.watchMu.Lock()
	if !st.stopped {
		st.stopped = true
		close(st.stop)
	}
	st.watchMu.Unlock()
	st.watchWG.Wait()
	return nil
}

// onRecord puts a delivered record into the table.
func (st *Store) onRecord(m natsjs.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return
	}
	key, ok := strings.CutPrefix(m.Subject(), kvSubjectPre+st.RecordBucket()+".")
	if !ok {
		return
	}
	msgID, err := base64.RawURLEncoding.DecodeString(key)
	if err != nil {
		return
	}
	at := unixNano(m.Headers().Get(hdrRecordAt))
	if at.IsZero() {
		at = md.Timestamp
	}
	pending := md.NumPending
	if pending == 0 && !st.nc.IsConnected() { // delivered before the connection dropped
		pending = 1
	}
	st.table.put(time.Now(), md.Sequence.Stream, string(msgID), string(m.Data()), at, pending)
}

// watch is the watch's goroutine: it marks the table behind as soon as
// the connection drops (records stored meanwhile arrive only once the
// ordered consumer is recreated, and a restarted server's streams forget
// the ids of the jobs they no longer hold), and every watchEvery expires
// records and checks a catch-up against the stream's last sequence. It
// stops at Stop, or once the connection is closed.
func (st *Store) watch(s natsjs.Stream, cc natsjs.ConsumeContext) {
	status := st.nc.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	defer st.nc.RemoveStatusListener(status)
	tick := time.NewTicker(watchEvery)
	defer tick.Stop()
	reconnects := st.nc.Stats().Reconnects
	for {
		st.checkCatchUp(s)
		select {
		case <-status:
			st.table.setCaughtUp(false)
		case <-tick.C:
			st.table.expire(time.Now())
		case <-st.stop:
			cc.Stop()
			return
		}
		if st.nc.IsClosed() {
			cc.Stop()
			return
		}
		// A missed status event (its buffer was full) shows here.
		if n := st.nc.Stats().Reconnects; n != reconnects || !st.nc.IsConnected() {
			reconnects = n
			st.table.setCaughtUp(false)
		}
	}
}

// checkCatchUp marks the table caught up when it holds the stream's last
// record, or the stream holds none.
func (st *Store) checkCatchUp(s natsjs.Stream) {
	lastSeq, caughtUp := st.table.status()
	if caughtUp || !st.nc.IsConnected() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	info, err := s.Info(ctx)
	if err == nil && (info.State.Msgs == 0 || lastSeq >= info.State.LastSeq) {
		st.table.setCaughtUp(true)
	}
}

// waitRecords waits until the table caught up with the records stream.
func (st *Store) waitRecords(ctx context.Context) error {
	select {
	case <-st.table.caughtUpChan():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w (stream %s): %w", ErrRecordsLoading, st.recordStream(), ctx.Err())
	}
}

// recordsReady reports whether the dedupe records are all in memory.
func (st *Store) recordsReady() error {
	if _, ok := st.table.status(); !ok {
		return fmt.Errorf("%w (stream %s)", ErrRecordsLoading, st.recordStream())
	}
	return nil
}
