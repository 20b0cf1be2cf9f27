package deadletter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
)

// Delete removes one dead letter, or returns ErrNotFound.
func (d *Store) Delete(ctx context.Context, downstream string, seq uint64) error {
	ds, s, err := d.stream(ctx, downstream)
	if err != nil {
		return err
	}
	if seq == 0 {
		return fmt.Errorf("%w: downstream %s: sequences start at 1", ErrNotFound, downstream)
	}
	ds.acctMu.Lock()
	defer ds.acctMu.Unlock()
	if err := s.DeleteMsg(ctx, seq); err != nil {
		// The server says "sequence not found" or "stream store EOF" (past
		// the last); ask again plainly.
		if _, gerr := s.GetMsg(ctx, seq); errors.Is(gerr, natsjs.ErrMsgNotFound) {
			return fmt.Errorf("%w: downstream %s holds no dead letter %d", ErrNotFound, downstream, seq)
		}
		return fmt.Errorf("delete dead letter %d of %s: %w", seq, downstream, err)
	}
	ds.acct.removed(1)
	return nil
}

// purgeResponse is the JetStream API's answer to a purge, which the
// client's Stream.Purge does not pass on: how many it removed.
type purgeResponse struct {
	Success bool             `json:"success"`
	Purged  uint64           `json:"purged"`
	Error   *natsjs.APIError `json:"error"`
}

// Purge removes every dead letter of downstream.
func (d *Store) Purge(ctx context.Context, downstream string) error {
	ds, _, err := d.stream(ctx, downstream)
	if err != nil {
		return err
	}
	ds.acctMu.Lock()
	defer ds.acctMu.Unlock()
	// The raw request, not Stream.Purge: only its answer says how many
	// were removed, which must not be counted as discarded.
	msg, err := d.nc.RequestWithContext(ctx, "$JS.API.STREAM.PURGE."+ds.name, []byte("{}"))
	if err != nil {
		return fmt.Errorf("purge dead letters of %s: %w", downstream, err)
	}
	var resp purgeResponse
	switch err := json.Unmarshal(msg.Data, &resp); {
	case err != nil:
		return fmt.Errorf("purge dead letters of %s: bad answer %q: %w", downstream, msg.Data, err)
	case resp.Error != nil:
		return fmt.Errorf("purge dead letters of %s: %w", downstream, resp.Error)
	case !resp.Success:
		return fmt.Errorf("purge dead letters of %s: refused: %s", downstream, msg.Data)
	}
	ds.acct.removed(resp.Purged)
	return nil
}

// Stats reports downstream's stored dead letters.
func (d *Store) Stats(ctx context.Context, downstream string) (Stats, error) {
	ds, s, err := d.stream(ctx, downstream)
	if err != nil {
		return Stats{}, err
	}
	ds.acctMu.Lock()
	defer ds.acctMu.Unlock()
	info, err := s.Info(ctx)
	if err != nil {
		return Stats{}, fmt.Errorf("dead-letter stats of %s: %w", downstream, err)
	}
	st := Stats{Count: int(info.State.Msgs), Discarded: ds.acct.observe(info)}
	if st.Count > 0 {
		st.Oldest = info.State.FirstTime
	}
	return st, nil
}

// discards counts the dead letters a stream's limits discarded, from its
// state: of the messages ever stored (LastSeq) those no longer held (LastSeq
// - Msgs) are discards, except those that were gone already when counting
// began and those this process removed. A stream deleted and made again
// (another Created time) starts a new count on top of the old one.
// Requires the stream's acctMu.
type discards struct {
	created time.Time // the stream counted
	known   bool
	base    uint64 // removals that are not discards: before the count began, and ours
	before  uint64 // discards of earlier streams of the same name
	last    uint64 // last count reported; never decreases
}

// observe books the stream's state and returns the discards so far.
func (a *discards) observe(info *natsjs.StreamInfo) uint64 {
	if info == nil {
		return a.last
	}
	st := info.State
	gone := st.LastSeq - min(st.Msgs, st.LastSeq)
	switch {
	case !a.known:
		a.known, a.created, a.base = true, info.Created, gone
	case !info.Created.Equal(a.created):
		a.created, a.before, a.base = info.Created, a.last, 0
	}
	if gone > a.base {
		a.last = max(a.last, a.before+gone-a.base)
	}
	return a.last
}

// removed books n removals of this process's (Delete, Purge).
func (a *discards) removed(n uint64) { a.base += n }
