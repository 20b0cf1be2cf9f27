package deadletter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// replayPlan is one downstream's replay in progress, as it is stored: the
// next start resumes it from After.
type replayPlan struct {
	Downstream string  `json:"downstream"`
	Rate       float64 `json:"rate"`             // replays per second
	Reason     string  `json:"reason,omitempty"` // "" = any
	Remaining  int     `json:"remaining"`        // still to replay
	After      uint64  `json:"after"`            // replayed (or passed over) up to this seq
	Through    uint64  `json:"through"`          // the last seq this replay takes
	rev        uint64  // revision of the stored plan
}

// Plans keeps replay plans, one per downstream, with compare-and-swap
// on their revision, so that a plan replaced by a new request (or taken
// by another instance) stops the replayer that held the old one.
type Plans interface {
	// load returns every stored plan.
	load(ctx context.Context) ([]replayPlan, error)
	// create stores p whatever is stored for its downstream and sets p.rev.
	create(ctx context.Context, p *replayPlan) error
	// save stores p if p.rev is still the stored revision, and sets
	// p.rev; else it returns errTakenOver.
	save(ctx context.Context, p *replayPlan) error
	// remove deletes p if p.rev is still the stored revision.
	remove(ctx context.Context, p replayPlan) error
}

// KVPlans are Plans in a NATS KV bucket (key = downstream), created on
// the first replay. Create them with NewKVPlans; safe for concurrent use.
type KVPlans struct {
	js  natsjs.JetStream
	cfg natsjs.KeyValueConfig

	mu sync.Mutex
	kv natsjs.KeyValue // nil until found or created
}

// NewKVPlans keeps plans on nc in the bucket <StreamPrefix>_REPLAY, with
// the store's replicas and storage ("" StreamPrefix = SHAPER). It does no
// I/O.
func NewKVPlans(nc *nats.Conn, s StoreSettings) (*KVPlans, error) {
	js, err := natsjs.New(nc)
	if err != nil {
		return nil, fmt.Errorf("replay plans: %w", err)
	}
	if s.StreamPrefix == "" {
		s.StreamPrefix = "SHAPER"
	}
	kc := natsjs.KeyValueConfig{
		Bucket:      s.StreamPrefix + "_REPLAY",
		Description: "shaperd dead-letter replays in progress: one key per downstream",
		History:     1,
		Replicas:    max(s.Replicas, 1),
		Storage:     natsjs.FileStorage,
	}
	if s.Storage == "memory" {
		kc.Storage = natsjs.MemoryStorage
	}
	return &KVPlans{js: js, cfg: kc}, nil
}

// open finds the bucket, or creates it when create is set; without create
// a missing bucket is (nil, nil).
func (k *KVPlans) open(ctx context.Context, create bool) (natsjs.KeyValue, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.kv != nil {
		return k.kv, nil
	}
	kv, err := k.js.KeyValue(ctx, k.cfg.Bucket)
	if errors.Is(err, natsjs.ErrBucketNotFound) {
		if !create {
			return nil, nil
		}
		kv, err = k.js.CreateKeyValue(ctx, k.cfg)
		if errors.Is(err, natsjs.ErrBucketExists) { // another instance was first
			kv, err = k.js.KeyValue(ctx, k.cfg.Bucket)
		}
	}
	if err != nil {
		if noJetStream(err) {
			err = fmt.Errorf("%w: %w", ErrNoJetStream, err)
		}
		return nil, fmt.Errorf("replay bucket %s: %w", k.cfg.Bucket, err)
	}
	k.kv = kv
	return kv, nil
}

func (k *KVPlans) load(ctx context.Context) ([]replayPlan, error) {
	kv, err := k.open(ctx, false)
	if err != nil || kv == nil {
		return nil, err
	}
	keys, err := kv.Keys(ctx)
	if errors.Is(err, natsjs.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("replay bucket %s: list: %w", k.cfg.Bucket, err)
	}
	var plans []replayPlan
	for _, key := range keys {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, natsjs.ErrKeyNotFound) {
			continue // finished meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("replay bucket %s: read %s: %w", k.cfg.Bucket, key, err)
		}
		var p replayPlan
		if json.Unmarshal(e.Value(), &p) != nil || p.Downstream != key {
			_ = kv.Delete(ctx, key) // not a plan this daemon wrote: it cannot be resumed
			continue
		}
		p.rev = e.Revision()
		plans = append(plans, p)
	}
	return plans, nil
}

func (k *KVPlans) create(ctx context.Context, p *replayPlan) error {
	kv, err := k.open(ctx, true)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(p) // a struct of numbers and strings: never fails
	rev, err := kv.Put(ctx, p.Downstream, b)
	if err != nil {
		return fmt.Errorf("replay bucket %s: store %s: %w", k.cfg.Bucket, p.Downstream, err)
	}
	p.rev = rev
	return nil
}

func (k *KVPlans) save(ctx context.Context, p *replayPlan) error {
	kv, err := k.open(ctx, true)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(p)
	rev, err := kv.Update(ctx, p.Downstream, b, p.rev)
	switch {
	case isRevisionMismatch(err):
		return errTakenOver
	case err != nil:
		return fmt.Errorf("replay bucket %s: update %s: %w", k.cfg.Bucket, p.Downstream, err)
	}
	p.rev = rev
	return nil
}

func (k *KVPlans) remove(ctx context.Context, p replayPlan) error {
	kv, err := k.open(ctx, false)
	if err != nil || kv == nil {
		return err
	}
	err = kv.Delete(ctx, p.Downstream, natsjs.LastRevision(p.rev))
	if err != nil && !isRevisionMismatch(err) { // replaced: the newer plan stays
		return fmt.Errorf("replay bucket %s: delete %s: %w", k.cfg.Bucket, p.Downstream, err)
	}
	return nil
}

// isRevisionMismatch reports a compare-and-swap that lost: the stored
// plan is not the revision the caller held.
func isRevisionMismatch(err error) bool {
	return errors.Is(err, natsjs.ErrKeyRevisionMismatch) || errors.Is(err, natsjs.ErrKeyExists)
}
