package daemon

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// Start-up checks of JetStream (the queues' streams and consumers, the
// dead-letter streams, the admission bucket) are tried again quickly
// rather than waited out: a request lost while a cluster elects a leader
// (or the first one on a cluster just formed) costs one short try, not the
// whole of ensureTimeout. Tries are bounded by startTry, doubling after
// each failed try up to maxStartTry, so that a slow but healthy server
// (creating replicated streams on a loaded machine) still gets there;
// between tries the pause grows from startPause to maxStartPause.
const (
	startTry      = time.Second
	maxStartTry   = 4 * time.Second
	startPause    = 50 * time.Millisecond
	maxStartPause = 500 * time.Millisecond
)

// retryStart runs check until it succeeds, fails with an error final
// reports as final, or ctx is done, and returns check's last error. It
// blocks for at most as long as ctx allows.
func retryStart(ctx context.Context, check func(context.Context) error, final func(error) bool) error {
	try, pause := startTry, startPause
	for {
		tctx, cancel := context.WithTimeout(ctx, try)
		err := check(tctx)
		cancel()
		if err == nil || final(err) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		try, pause = min(2*try, maxStartTry), min(2*pause, maxStartPause)
	}
}

// noJetStream reports an answer that means the server or account has no
// JetStream: nobody answers the JetStream API, so trying again at start is
// pointless (the queues keep trying in the background).
func noJetStream(err error) bool {
	return errors.Is(err, natsjs.ErrJetStreamNotEnabled) || errors.Is(err, natsjs.ErrJetStreamNotEnabledForAccount) ||
		errors.Is(err, nats.ErrNoResponders)
}
