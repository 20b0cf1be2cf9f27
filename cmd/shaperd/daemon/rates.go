package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/config"
	"github.com/shaperd/shaper/shaper/policy"
)

// kvRates keeps what adaptive downstreams learned (shaper.Rates) in one
// JetStream KV bucket, nats.jetstream.rates_bucket: one key per
// downstream (names are valid keys), a small JSON value. The bucket is
// found or created on first use, retried at most once a second while that
// fails; its entries expire after twice policy.LearnedMaxAge (the shaper
// ignores older ones anyway). Safe for concurrent use.
type kvRates struct {
	js  jetstream.JetStream
	cfg jetstream.KeyValueConfig

	mu      sync.Mutex // serialises finding the bucket
	kv      jetstream.KeyValue
	lastTry time.Time
}

// keptValue is a kept value as stored.
type keptValue struct {
	Rate          float64   `json:"rate"`
	WindowSeconds float64   `json:"window_seconds,omitempty"`
	At            time.Time `json:"at"`
}

func newKVRates(nc *nats.Conn, j config.JetStream) (*kvRates, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("rates bucket: %w", err)
	}
	cfg := kvBucketConfig(j, j.RatesBucket, "shaperd: learned rates of adaptive downstreams")
	cfg.TTL = 2 * policy.LearnedMaxAge
	return &kvRates{js: js, cfg: cfg}, nil
}

// bucket finds or creates the bucket.
func (r *kvRates) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kv != nil {
		return r.kv, nil
	}
	now := time.Now()
	if now.Sub(r.lastTry) < time.Second {
		return nil, fmt.Errorf("rates %w; retrying", errBucketNotReady)
	}
	r.lastTry = now
	kv, err := findOrCreateKV(ctx, r.js, r.cfg)
	if err != nil {
		return nil, fmt.Errorf("rates bucket %s: %w", r.cfg.Bucket, err)
	}
	r.kv = kv
	return kv, nil
}

// Load reads downstream's kept value; ok is false when none is kept.
func (r *kvRates) Load(ctx context.Context, downstream string) (policy.Learned, bool, error) {
	kv, err := r.bucket(ctx)
	if err != nil {
		return policy.Learned{}, false, err
	}
	e, err := kv.Get(ctx, downstream)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return policy.Learned{}, false, nil
	}
	if err != nil {
		return policy.Learned{}, false, fmt.Errorf("read %s/%s: %w", r.cfg.Bucket, downstream, err)
	}
	var v keptValue
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return policy.Learned{}, false, fmt.Errorf("read %s/%s: not a kept rate: %w", r.cfg.Bucket, downstream, err)
	}
	return policy.Learned{Rate: v.Rate, Window: time.Duration(v.WindowSeconds * float64(time.Second)), At: v.At}, true, nil
}

// Save writes downstream's kept value.
func (r *kvRates) Save(ctx context.Context, downstream string, v policy.Learned) error {
	kv, err := r.bucket(ctx)
	if err != nil {
		return err
	}
	b, err := json.Marshal(keptValue{Rate: v.Rate, WindowSeconds: v.Window.Seconds(), At: v.At.UTC()})
	if err != nil {
		return fmt.Errorf("save %s/%s: %w", r.cfg.Bucket, downstream, err)
	}
	if _, err := kv.Put(ctx, downstream, b); err != nil {
		return fmt.Errorf("save %s/%s: %w", r.cfg.Bucket, downstream, err)
	}
	return nil
}
