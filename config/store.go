package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Bounds of the byte keys, enforced by Validate.
const (
	MinMaxStore = 1 << 20 // nats.embedded.max_store
	MaxMaxStore = 1 << 50
	MaxMaxBytes = 1 << 40 // downstreams.NAME.queue.max_bytes
	// StoreHeadroom is what a stored message may carry beyond its payload
	// (the job's headers); the largest stored message is ingress.max_payload
	// plus this.
	StoreHeadroom = 64 << 10
)

// StorePlan shares a bounded JetStream store (nats.embedded.max_store, the
// embedded server's own limit, or the account's) so that dead letters and
// job outcomes keep room of their own: every dead-letter stream gets a byte
// bound (discarding its oldest past it), so do the records and events of
// every jetstream downstream that keeps outcomes, a tenth of the store is
// left to the KV buckets, and every jetstream queue is bounded by its
// queue.max_bytes or, without one, by an equal share of what is left.
// Since every stream is then bounded and the bounds add up to at most the
// store, a full queue can never take the room a dead letter or a record
// needs.
type StorePlan struct {
	// Queue is the share of the store of each jetstream queue without
	// queue.max_bytes, by downstream (absent: bounded by its queue.max_bytes,
	// or a memory queue).
	Queue map[string]int64
	// Dead is each downstream's dead-letter stream's byte bound.
	Dead map[string]int64
	// Outcomes is the room of each jetstream downstream with outcomes.keep
	// above 0, by downstream: its records and its events (with
	// outcomes.events) share it, and past it the oldest finished records
	// and the oldest events are discarded. A tenth of the store split
	// between all downstreams, at least a record and an event of the
	// largest size (outcomes.result_bytes) each. Absent: a memory queue's
	// downstream (records in the instance, events not stored) or keep 0.
	Outcomes map[string]int64
}

// StorePlan shares a store of limit bytes (named what in an error, e.g.
// "nats.embedded.max_store 8MiB") among c's streams. It reports, naming
// every bound, a store too small for them: each dead-letter stream needs
// room for two of the largest messages, each downstream's outcomes for a
// record and an event, each queue without queue.max_bytes for one message.
func (c Config) StorePlan(limit int64, what string) (StorePlan, error) {
	plan := StorePlan{Queue: map[string]int64{}, Dead: map[string]int64{}, Outcomes: map[string]int64{}}
	names := slices.Sorted(maps.Keys(c.Downstreams))
	if limit <= 0 || len(names) == 0 {
		return plan, nil
	}
	msg := int64(c.Ingress.MaxPayload) + StoreHeadroom
	share := limit / 10 / int64(len(names))
	dead := max(share, 2*msg) &^ 1023 // whole KiB: plain numbers in messages
	kv := limit / 10 &^ 1023
	var explicit, outcomes int64
	var bounded, open, rooms []string
	for _, name := range names {
		plan.Dead[name] = dead
		d := c.Downstreams[name]
		if d.Queue.Backend == BackendJetStream && d.Outcomes.Keep > 0 {
			room := max(share&^1023, d.Outcomes.storeFloor())
			plan.Outcomes[name] = room
			outcomes += room
			rooms = append(rooms, fmt.Sprintf("%s %s", name, ByteSize(room)))
		}
		switch q := d.Queue; {
		case q.Backend != BackendJetStream:
		case q.MaxBytes > 0:
			explicit += int64(q.MaxBytes)
			bounded = append(bounded, fmt.Sprintf("downstreams.%s.queue.max_bytes %s", name, q.MaxBytes))
		default:
			open = append(open, name)
		}
	}
	free := limit - kv - dead*int64(len(names)) - outcomes - explicit
	if free < 0 || (len(open) > 0 && free/int64(len(open)) < msg) {
		need := kv + dead*int64(len(names)) + outcomes + explicit + msg*int64(len(open))
		parts := append(bounded, fmt.Sprintf("dead letters' room %s (%d downstreams × %s)",
			ByteSize(dead*int64(len(names))), len(names), ByteSize(dead)))
		hint := "raise it, or lower the queues' queue.max_bytes or ingress.max_payload"
		if len(rooms) > 0 {
			parts = append(parts, fmt.Sprintf("outcomes' room %s (%s)", ByteSize(outcomes), strings.Join(rooms, ", ")))
			hint += ", or keep less of the outcomes (a lower outcomes.result_bytes, or outcomes.keep 0)"
		}
		parts = append(parts, fmt.Sprintf("%s for KV buckets", ByteSize(kv)))
		if len(open) > 0 {
			parts = append(parts, fmt.Sprintf("one message of %s for each jetstream queue without queue.max_bytes (%s)",
				ByteSize(msg), strings.Join(open, ", ")))
		}
		return plan, fmt.Errorf("%s cannot hold the bounds it must keep room for: %s = at least %s; %s",
			what, strings.Join(parts, " + "), ByteSize(need), hint)
	}
	for _, name := range open {
		plan.Queue[name] = free / int64(len(open))
	}
	return plan, nil
}

// validateStore checks the byte keys: every queue.max_bytes (0, or room
// for at least one job of ingress.max_payload), nats.embedded.max_store,
// and that a bounded embedded store holds what StorePlan must keep in it.
func (c Config) validateStore(v validator) {
	for _, name := range slices.Sorted(maps.Keys(c.Downstreams)) {
		k, b := "downstreams."+name+".queue.max_bytes", c.Downstreams[name].Queue.MaxBytes
		if v.ok(k) && b != 0 && (b < c.Ingress.MaxPayload || b > MaxMaxBytes) {
			v.add(k, "must be 0 (no byte bound) or %s (ingress.max_payload)..%s, got %s",
				c.Ingress.MaxPayload, ByteSize(MaxMaxBytes), b)
		}
	}
	const k = "nats.embedded.max_store"
	b := c.NATS.Embedded.MaxStore
	switch {
	case !v.ok(k) || b == 0:
		return
	case c.NATS.URL != "":
		v.add(k, "is only used by the embedded server (nats.url empty); remove it, or set the limit on the NATS server or account")
		return
	case b < MinMaxStore || b > MaxMaxStore:
		v.add(k, "must be 0 (the server's own limit) or %s..%s, got %s", ByteSize(MinMaxStore), ByteSize(MaxMaxStore), b)
		return
	}
	if len(v.ps.list) > 0 { // the plan reads other keys: only once they are valid
		return
	}
	if _, err := c.StorePlan(int64(b), fmt.Sprintf("%s %s", k, b)); err != nil {
		v.add(k, "%s", strings.TrimPrefix(err.Error(), fmt.Sprintf("%s %s ", k, b)))
	}
}
