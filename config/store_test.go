package config

import (
	"maps"
	"strings"
	"testing"
)

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

// Each jetstream downstream that keeps outcomes gets room for its records
// and events: its part of a tenth of the store, at least a record and an
// event of the largest size; a memory queue's downstream and one with
// keep 0 get none. The queues share what is left, and a store too small
// names the outcomes' room.
func TestStorePlanOutcomes(t *testing.T) {
	c := Defaults()
	c.Ingress.MaxPayload = 64 << 10
	on := DefaultDownstream().Outcomes // keep 24h, result_bytes 64KiB
	big := on
	big.ResultBytes = 1 << 20
	c.Downstreams = map[string]Downstream{
		"a": {Queue: Queue{Backend: BackendJetStream}, Outcomes: on},
		"b": {Queue: Queue{Backend: BackendJetStream}}, // keep 0
		"c": {Queue: Queue{Backend: BackendMemory}, Outcomes: on},
		"d": {Queue: Queue{Backend: BackendJetStream}, Outcomes: big},
	}
	const limit = 40 << 20
	plan, err := c.StorePlan(limit, "test")
	if err != nil {
		t.Fatal(err)
	}
	share := int64(limit / 10 / 4 &^ 1023)
	floor := (2*(int64(4*((1<<20+2)/3))+StoreHeadroom) + 1023) &^ 1023 // base64 of 1MiB, twice
	want := map[string]int64{"a": share, "d": floor}
	if !maps.Equal(plan.Outcomes, want) {
		t.Errorf("outcomes' room %v, want %v", plan.Outcomes, want)
	}
	dead := int64(limit / 10 / 4 &^ 1023)
	kv := int64(limit / 10 &^ 1023)
	q := (limit - kv - 4*dead - share - floor) / 3
	if plan.Queue["a"] != q || plan.Queue["b"] != q || plan.Queue["d"] != q {
		t.Errorf("queue shares %v, want %d each for a, b, d", plan.Queue, q)
	}
	if total := 3*q + 4*dead + kv + share + floor; total > limit {
		t.Errorf("bounds add up to %d, more than the store's %d", total, limit)
	}

	_, err = c.StorePlan(4<<20, "nats.embedded.max_store 4MiB")
	if err == nil || !strings.Contains(err.Error(), "outcomes' room 3158KiB (a 299KiB, d 2859KiB)") ||
		!strings.Contains(err.Error(), "outcomes.keep 0") {
		t.Errorf("a 4MiB store: %v; want an error naming the outcomes' room", err)
	}
}
