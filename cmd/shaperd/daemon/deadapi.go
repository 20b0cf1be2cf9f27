package daemon

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/cmd/shaperd/admin"
	"github.com/shaperd/shaper/config"
	"github.com/shaperd/shaper/queue/jetstream"
	"github.com/shaperd/shaper/shaper"
)

// deadAPI is the admin API's view of the dead letters (admin.DeadLetters):
// the daemon's dead-letter store for list, show, delete and purge, its
// replayers for replay.
type deadAPI struct{ d *Daemon }

var _ admin.DeadLetters = deadAPI{}

// store returns the dead-letter store once Run has made it, after
// checking that downstream is configured.
func (a deadAPI) store(downstream string) (deadStore, error) {
	if _, ok := a.d.known(downstream); !ok {
		return nil, fmt.Errorf("dead letters of %q: %w", downstream, shaper.ErrUnknownDownstream)
	}
	st := a.d.dead.Load()
	switch {
	case st == nil && a.d.deadPublishOnly.Load():
		return nil, errNoStore
	case st == nil:
		return nil, errStarting
	}
	return st, nil
}

func (a deadAPI) List(ctx context.Context, downstream string, q admin.DeadQuery) ([]admin.DeadLetter, int, error) {
	st, err := a.store(downstream)
	if err != nil {
		return nil, 0, err
	}
	list, total, err := st.List(ctx, downstream, jetstream.DeadFilter{Reason: q.Reason, Limit: q.Limit})
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
		Headers:    producerHeaders(http.Header(dl.Header), ""),
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
	return a.d.replays.replace(ctx, downstream, r)
}

// deadView is a stored dead letter as the admin API lists it, read from
// the headers the dead-letter publisher set.
func deadView(dl jetstream.DeadLetter) admin.DeadLetter {
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

// startReplays lets the replayers run on the dead-letter store, the shaper
// and a KV bucket of plans on nc, resuming every stored replay; it returns
// their cleanup.
func (d *Daemon) startReplays(ctx context.Context, cfg config.Config, nc *nats.Conn, sh *shaper.Shaper) (func() error, error) {
	st := d.dead.Load()
	if st == nil { // no JetStream: dead letters are only published, nothing to replay
		return func() error { return nil }, nil
	}
	plans, err := newKVPlans(nc, cfg)
	if err != nil {
		return nil, err
	}
	return d.replays.start(ctx, &replayDeps{
		store: st, target: sh, plans: plans, keyHeader: cfg.Ingress.KeyHeader,
		rate: func(name string) (float64, bool) {
			ds, ok := d.config().Downstreams[name]
			return float64(ds.Rate), ok
		},
	}), nil
}

// downstreamChanges lists next's downstreams and those of old it no
// longer has.
func downstreamChanges(old, next config.Config) (names, gone []string) {
	for name := range next.Downstreams {
		names = append(names, name)
	}
	for name := range old.Downstreams {
		if _, ok := next.Downstreams[name]; !ok {
			gone = append(gone, name)
		}
	}
	return names, gone
}
