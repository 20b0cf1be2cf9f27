package daemon

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/config"
)

// kvBucketConfig is one of the daemon's own KV buckets (the learned rates,
// the runtime changes): one value per key, on nats.jetstream's storage and
// replicas.
func kvBucketConfig(j config.JetStream, bucket, description string) jetstream.KeyValueConfig {
	storage := jetstream.FileStorage
	if j.Storage == "memory" {
		storage = jetstream.MemoryStorage
	}
	return jetstream.KeyValueConfig{Bucket: bucket, Description: description, History: 1,
		Storage: storage, Replicas: max(j.Replicas, 1)}
}

// findOrCreateKV finds cfg's bucket, or creates it; when another instance
// created it first, it finds that one.
func findOrCreateKV(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, cfg.Bucket)
		}
	}
	return kv, err
}
