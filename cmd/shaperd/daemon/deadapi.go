package daemon

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/shaperd/shaper/cmd/shaperd/admin"
	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/deadletter"
)

// deadAPI is the admin API's view of the dead letters (admin.DeadLetters):
// the daemon's dead-letter store for list, show, delete and purge, its
// replayers for replay; it only translates between the two packages.
type deadAPI struct{ d *Daemon }

var _ admin.DeadLetters = deadAPI{}

// store returns the dead-letter store once Run has made it, after
// checking that downstream is configured.
func (a deadAPI) store(downstream string) (*deadletter.Store, error) {
	if _, ok := a.d.known(downstream); !ok {
		return nil, fmt.Errorf("dead letters of %q: %w", downstream, shaper.ErrUnknownDownstream)
	}
	w := a.d.live()
	st := w.deadStore
	switch {
	case st == nil && w.deadPublishOnly:
		return nil, deadletter.ErrNoJetStream
	case st == nil:
		return nil, deadletter.ErrNotStarted
	}
	return st, nil
}

func (a deadAPI) List(ctx context.Context, downstream string, q admin.DeadQuery) ([]admin.DeadLetter, int, error) {
	st, err := a.store(downstream)
	if err != nil {
		return nil, 0, err
	}
	list, total, err := st.List(ctx, downstream, deadletter.Filter{Reason: q.Reason, Limit: q.Limit})
	if err != nil {
		return nil, 0, deadError(err)
	}
	out := make([]admin.DeadLetter, len(list))
	for i, dl := range list {
		out[i] = deadView(dl)
	}
	return out, total, nil
}

func (a deadAPI) Get(ctx context.Context, downstream string, seq uint64) (admin.DeadLetterDetail, error) {
	st, err := a.store(downstream)
	if err != nil {
		return admin.DeadLetterDetail{}, err
	}
	dl, err := st.Get(ctx, downstream, seq)
	if err != nil {
		return admin.DeadLetterDetail{}, deadError(err)
	}
	return admin.DeadLetterDetail{
		DeadLetter: deadView(dl),
		Payload:    dl.Data,
		Headers:    deadletter.ProducerHeaders(http.Header(dl.Header), ""),
	}, nil
}

func (a deadAPI) Delete(ctx context.Context, downstream string, seq uint64) error {
	st, err := a.store(downstream)
	if err != nil {
		return err
	}
	return deadError(st.Delete(ctx, downstream, seq))
}

func (a deadAPI) Purge(ctx context.Context, downstream string) error {
	st, err := a.store(downstream)
	if err != nil {
		return err
	}
	return deadError(st.Purge(ctx, downstream))
}

func (a deadAPI) Replay(ctx context.Context, downstream string, r admin.ReplayRequest) (int, error) {
	if _, err := a.store(downstream); err != nil {
		return 0, err
	}
	return a.d.replays.Replace(ctx, downstream, deadletter.ReplayRequest{Rate: r.Rate, Reason: r.Reason, Limit: r.Limit})
}

// deadView is a stored dead letter as the admin API lists it, read from
// the headers the dead-letter publisher set.
func deadView(dl deadletter.Stored) admin.DeadLetter {
	h := http.Header(dl.Header)
	attempts, _ := strconv.Atoi(h.Get(hdrAttempt))
	size := dl.Size
	if size == 0 {
		size = len(dl.Data)
	}
	return admin.DeadLetter{
		Seq: dl.Seq, JobID: h.Get(hdrJobID), Reason: h.Get(hdrReason), Error: h.Get(hdrError),
		Attempts: attempts, Time: dl.Time.UTC(), PayloadBytes: size,
	}
}

// deadError says so when the cause of the store's error is a NATS server
// without JetStream; the admin API answers deadletter.ErrNotFound with 404.
func deadError(err error) error {
	return deadletter.StoreError(err)
}
