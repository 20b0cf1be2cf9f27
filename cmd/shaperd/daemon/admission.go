package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/config"
	"github.com/shaperd/shaper/limiter"
	"github.com/shaperd/shaper/limiter/natskv"
	"github.com/shaperd/shaper/shaper/admission"
)

// kvAdmitter is a natskv.Limiter as the shaper wants it: a fail-closed
// store failure wraps admission.ErrUnavailable; decisions do I/O.
type kvAdmitter struct{ *natskv.Limiter }

func (a kvAdmitter) AllowAt(key string, now time.Time, cost int) (limiter.Decision, error) {
	d, err := a.Limiter.AllowAt(key, now, cost)
	if errors.Is(err, natskv.ErrUnavailable) {
		err = fmt.Errorf("%w: %w", admission.ErrUnavailable, err)
	}
	return d, err
}

func (kvAdmitter) Stats() (limiter.Stats, bool) { return limiter.Stats{}, false }
func (kvAdmitter) Blocks() bool                 { return true }

// admitters prepares the admission store of admission.store nats (one KV
// bucket, nats.jetstream.admission_bucket) and returns the shaper's
// admitter factory and the store's Close, to run after the shaper stopped
// and before NATS closes. While NATS is reachable at start and a downstream
// uses the store, the bucket is created or checked now, so an incompatible
// bucket stops start-up; otherwise it is created on first use.
func (d *Daemon) admitters(ctx context.Context, cfg config.Config, nc *nats.Conn) (admission.Remote, func() error, error) {
	j := cfg.NATS.JetStream
	st, err := natskv.New(nc, natskv.Settings{
		Bucket:   j.AdmissionBucket,
		Replicas: j.Replicas,
		Storage:  j.Storage,
		Timeout:  j.AdmissionTimeout,
		Metrics:  natskv.NewMetrics(d.reg),
		Logger:   d.log,
	})
	if err != nil {
		return nil, nil, err
	}
	used := false
	for _, ls := range cfg.ShaperSettings().Lanes {
		used = used || (ls.Admission != nil && ls.AdmissionStore.Kind == config.AdmissionNATS)
	}
	if used && nc.IsConnected() {
		ectx, cancel := context.WithTimeout(ctx, ensureTimeout)
		err := retryStart(ectx, st.Ensure, func(err error) bool { return errors.Is(err, natskv.ErrIncompatible) || noJetStream(err) })
		cancel()
		switch {
		case errors.Is(err, natskv.ErrIncompatible):
			_ = st.Close()
			return nil, nil, fmt.Errorf("admission store: %w", err)
		case err != nil:
			d.log.Warn("admission bucket not ready yet; creating it on first use", "bucket", st.Bucket(), "error", err.Error())
		}
	}
	var mu sync.Mutex
	current := map[string]*natskv.Limiter{}
	build := func(as admission.Settings) (admission.Admitter, error) {
		if as.Store.Kind != config.AdmissionNATS {
			return nil, fmt.Errorf("admission store %q is not supported", as.Store.Kind)
		}
		l, err := st.Limiter(as.Lane, *as.Rule, natskv.Options{
			FailClosed: as.Store.FailClosed, Approximate: as.Store.Approximate,
		})
		if err != nil {
			return nil, err
		}
		// A reload replaces the lane's limiter: stop the old one's
		// background sync (it decides exactly until the lane drops it).
		mu.Lock()
		if old := current[as.Lane]; old != nil {
			_ = old.Close()
		}
		current[as.Lane] = l
		mu.Unlock()
		return kvAdmitter{l}, nil
	}
	return build, st.Close, nil
}
