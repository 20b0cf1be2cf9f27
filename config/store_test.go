package config

import "testing"

// StorePlan shares a bounded store: each dead-letter stream keeps its room,
// a tenth is left to KV buckets, each jetstream queue without
// queue.max_bytes gets an equal share of the rest; memory queues and
// queues with queue.max_bytes get none; the bounds add up to at most the
// store.
func TestStorePlan(t *testing.T) {
	c := Defaults()
	c.Ingress.MaxPayload = 64 << 10
	c.Downstreams = map[string]Downstream{
		"a": {Queue: Queue{Backend: BackendJetStream}},
		"b": {Queue: Queue{Backend: BackendJetStream}},
		"c": {Queue: Queue{Backend: BackendJetStream, MaxBytes: 1 << 20}},
		"d": {Queue: Queue{Backend: BackendMemory, MaxBytes: 1 << 20}},
	}
	const limit = 40 << 20
	plan, err := c.StorePlan(limit, "test")
	if err != nil {
		t.Fatal(err)
	}
	dead := int64(limit / 10 / 4 &^ 1023)
	for _, name := range []string{"a", "b", "c", "d"} {
		if plan.Dead[name] != dead {
			t.Errorf("dead-letter room of %s = %d, want %d", name, plan.Dead[name], dead)
		}
	}
	if _, ok := plan.Queue["c"]; ok {
		t.Error("a queue with queue.max_bytes got a share")
	}
	if _, ok := plan.Queue["d"]; ok {
		t.Error("a memory queue got a share")
	}
	share := (limit - int64(limit/10&^1023) - 4*dead - 1<<20) / 2
	if plan.Queue["a"] != share || plan.Queue["b"] != share {
		t.Errorf("shares %d and %d, want %d each", plan.Queue["a"], plan.Queue["b"], share)
	}
	if total := plan.Queue["a"] + plan.Queue["b"] + 1<<20 + 4*dead + int64(limit/10&^1023); total > limit {
		t.Errorf("bounds add up to %d, more than the store's %d", total, limit)
	}
	if plan, err := c.StorePlan(0, "test"); err != nil || len(plan.Queue)+len(plan.Dead) != 0 {
		t.Errorf("an unbounded store: %+v, %v; want no bounds", plan, err)
	}
}
