package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/config"
	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/queue/jetstream"
	"github.com/shaperd/shaper/shaper"
)

// ensureTimeout bounds the start-up check of the JetStream streams (of
// each kind: queues, dead letters, admission), tried again and again
// within it (retryStart).
const ensureTimeout = 10 * time.Second

// readiness holds each durable queue by downstream name, so that /readyz
// asks the queues without knowing their kind and a reload gives them their
// new shares of the store. The zero value is empty; safe for concurrent
// use.
type readiness struct {
	mu     sync.Mutex
	queues map[string]*jetstream.Queue
}

func (r *readiness) add(name string, q *jetstream.Queue) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.queues == nil {
		r.queues = map[string]*jetstream.Queue{}
	}
	r.queues[name] = q
}

// of returns name's Ready; ok is false for a downstream without a durable
// queue.
func (r *readiness) of(name string) (ready func() error, ok bool) {
	q := r.queue(name)
	if q == nil {
		return nil, false
	}
	return q.Ready, true
}

// queue is name's durable queue, or nil.
func (r *readiness) queue(name string) *jetstream.Queue {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.queues[name]
}

// storage prepares the JetStream side: the durable queues' factory and the
// dead-letter stores.
func (d *Daemon) storage(ctx context.Context, w *wiring) (*jetstream.Store, error) {
	cfg, nc := w.cfg, w.nc
	if err := d.planStore(ctx, cfg, nc); err != nil {
		return nil, err
	}
	st, err := jetstream.New(nc, jetStreamSettings(cfg, d))
	if err != nil {
		return nil, err
	}
	if w.queues, err = d.durableQueues(ctx, cfg, nc, st); err != nil {
		return st, err
	}
	return st, d.startDeadLetters(ctx, w)
}

// durableQueues prepares the JetStream backend (queue.backend: jetstream)
// on st and returns the shaper's queue factory. While NATS is reachable at start
// it creates or checks every stream now, so an incompatible stream stops
// start-up with a clear error; otherwise each queue keeps trying in the
// background (/readyz is false until NATS is connected).
func (d *Daemon) durableQueues(ctx context.Context, cfg config.Config, nc *nats.Conn, st *jetstream.Store) (func(shaper.LaneSettings) (queue.Roles, error), error) {
	var durable []jetstream.QueueSettings
	for _, ls := range cfg.ShaperSettings().Lanes {
		if ls.Durable {
			durable = append(durable, d.queueSettings(ls))
		}
	}
	if len(durable) > 0 && nc.IsConnected() {
		ectx, cancel := context.WithTimeout(ctx, ensureTimeout)
		err := retryStart(ectx, func(ctx context.Context) error { return st.Ensure(ctx, durable) },
			func(err error) bool { return errors.Is(err, jetstream.ErrIncompatible) || noJetStream(err) })
		cancel()
		switch {
		case errors.Is(err, jetstream.ErrIncompatible):
			return nil, fmt.Errorf("jetstream queue: %w", err)
		case err != nil:
			d.log.Warn("jetstream queues not ready yet; retrying in the background", "error", err.Error())
		}
	}
	return func(ls shaper.LaneSettings) (queue.Roles, error) {
		q, err := st.Queue(d.queueSettings(ls))
		if err != nil {
			return queue.Roles{}, err
		}
		d.durable.add(ls.Name, q) // for /readyz and reloads
		return q.Roles(), nil
	}, nil
}

// jetStreamSettings maps nats.jetstream and ingress keys to the backend's.
func jetStreamSettings(cfg config.Config, d *Daemon) jetstream.Settings {
	j := cfg.NATS.JetStream
	return jetstream.Settings{
		StreamPrefix:  j.StreamPrefix,
		SubjectPrefix: j.SubjectPrefix,
		Replicas:      j.Replicas,
		Storage:       j.Storage,
		MaxMsgSize:    int32(int64(cfg.Ingress.MaxPayload) + embeddedHeadroom),
		DedupeWindow:  cfg.Ingress.DedupeWindow,
		AckWait:       j.AckWait,
		PinnedTTL:     j.PinnedTTL,
		Logger:        d.log,
	}
}

// queueSettings are what a lane's durable queue needs of its settings,
// and its share of a bounded store. Its rate and concurrency are in jobs:
// a lane with a batch starts calls of up to max_jobs.
func (d *Daemon) queueSettings(ls shaper.LaneSettings) jetstream.QueueSettings {
	n := ls.Batch.PerCall()
	return jetstream.QueueSettings{Name: ls.Name, Capacity: ls.Capacity, Rate: ls.Rate * float64(n), Concurrency: ls.Concurrency * n,
		MaxBytes: ls.MaxBytes, StoreShare: d.shares.queue(ls.Name), Priorities: ls.Priorities, Fairness: ls.Fairness,
		KeyCapacity: ls.KeyCapacity, Weights: ls.Weights, Placement: placement(ls.Placement)}
}

// placement is a lane's stream placement as the durable queue takes it.
func placement(p *shaper.Placement) *jetstream.Placement {
	if p == nil {
		return nil
	}
	return &jetstream.Placement{Cluster: p.Cluster, Tags: p.Tags}
}
