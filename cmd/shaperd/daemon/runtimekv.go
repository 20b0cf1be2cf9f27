package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/config"
	"github.com/shaperd/shaper/shaper/control"
)

// kvRuntime keeps the runtime changes of durable downstreams (pauses,
// timed or not, and overrides) in one JetStream KV bucket,
// <nats.jetstream.rates_bucket>_RUNTIME: one key per downstream, a small
// JSON value, no expiry (a pause until resumed lasts). The bucket is
// found or created on first use; Watch follows it for the instance. It is
// the control.Store of the admin API's changes (control.go).
type kvRuntime struct {
	js  jetstream.JetStream
	cfg jetstream.KeyValueConfig
	log *slog.Logger

	mu sync.Mutex // guards kv
	kv jetstream.KeyValue
}

// retryRuntime is how long Watch waits before finding the bucket again
// after a failure.
const retryRuntime = 2 * time.Second

func newKVRuntime(nc *nats.Conn, j config.JetStream, log *slog.Logger) (*kvRuntime, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("runtime bucket: %w", err)
	}
	return &kvRuntime{js: js, log: log, cfg: kvBucketConfig(j, j.RatesBucket+"_RUNTIME",
		"shaperd: runtime pauses and overrides of durable downstreams")}, nil
}

// bucket finds or creates the bucket.
func (r *kvRuntime) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kv != nil {
		return r.kv, nil
	}
	kv, err := findOrCreateKV(ctx, r.js, r.cfg)
	if err != nil {
		return nil, fmt.Errorf("runtime %w: %s: %w", errBucketNotReady, r.cfg.Bucket, err)
	}
	r.kv = kv
	return kv, nil
}

// Put keeps downstream's state. While the connection is down it refuses
// at once: a put made then would wait in the client's reconnect buffer and
// reach the bucket when NATS is back, after the caller was told it failed
// and had undone the change.
func (r *kvRuntime) Put(ctx context.Context, downstream string, s control.State) error {
	if !r.js.Conn().IsConnected() {
		return fmt.Errorf("save %s/%s: %w", r.cfg.Bucket, downstream, errNotConnected)
	}
	kv, err := r.bucket(ctx)
	if err != nil {
		return err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, downstream, b); err != nil {
		return fmt.Errorf("save %s/%s: %w", r.cfg.Bucket, downstream, err)
	}
	return nil
}

// Watch hands every state kept in the bucket, then every change to it, to
// follow until ctx is done; loaded is closed once the states kept before
// have been handed over (or ctx ended). A bucket that cannot be reached is
// tried again every retryRuntime, with one warning.
func (r *kvRuntime) Watch(ctx context.Context, follow func(string, control.State), loaded chan<- struct{}) {
	var once sync.Once
	done := func() { once.Do(func() { close(loaded) }) }
	defer done()
	warned := false
	for ctx.Err() == nil {
		err := r.watchOnce(ctx, follow, done)
		if ctx.Err() != nil {
			return
		}
		if !warned {
			r.log.Warn("runtime pauses and overrides of durable downstreams cannot be read from NATS KV; retrying", "bucket", r.cfg.Bucket, "error", fmt.Sprint(err))
			warned = true
		}
		select {
		case <-ctx.Done():
		case <-time.After(retryRuntime):
		}
	}
}

// watchOnce watches the bucket until ctx is done or the watch fails.
func (r *kvRuntime) watchOnce(ctx context.Context, follow func(string, control.State), loaded func()) error {
	bctx, cancel := context.WithTimeout(ctx, control.ShareTimeout)
	kv, err := r.bucket(bctx)
	cancel()
	if err != nil {
		return err
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("watch ended")
			}
			if e == nil { // every state kept before is handed over
				loaded()
				continue
			}
			var s control.State
			if e.Operation() == jetstream.KeyValuePut {
				if err := json.Unmarshal(e.Value(), &s); err != nil {
					r.log.Warn("a runtime state in NATS KV is not readable; ignored", "bucket", r.cfg.Bucket, "key", e.Key(), "error", err.Error())
					continue
				}
			}
			follow(e.Key(), s)
		}
	}
}
