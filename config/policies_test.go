package config

import (
	"reflect"
	"testing"
	"time"

	"github.com/shaperd/shaper/shaper"
)

// TestPoliciesFailures asserts the exact messages for the policy keys.
func TestPoliciesFailures(t *testing.T) {
	t.Parallel()
	_, err := LoadWith("testdata/policies_bad.yaml", noEnv)
	want := `downstreams.gql.queue.key_capacity: must be 0 (= queue.capacity) or queue.max_cost..queue.capacity (11..10), got 20 (env SHAPER_DOWNSTREAMS_GQL_QUEUE_KEY_CAPACITY)
downstreams.gql.queue.max_cost: must be 1..queue.capacity (10), got 11 (env SHAPER_DOWNSTREAMS_GQL_QUEUE_MAX_COST)
downstreams.gql.queue.weights: "silver" is not key=weight; write e.g. gold=3,silver=2 (env SHAPER_DOWNSTREAMS_GQL_QUEUE_WEIGHTS)
downstreams.gql.rate_control: "turbo" is not a rate control; use fixed or adaptive (env SHAPER_DOWNSTREAMS_GQL_RATE_CONTROL)
downstreams.printer.queue.fairness: "round_robin" is not a fairness mode; use none or key (env SHAPER_DOWNSTREAMS_PRINTER_QUEUE_FAIRNESS)
downstreams.printer.queue.weights: expected weights like gold=3,silver=2, got a mapping (env SHAPER_DOWNSTREAMS_PRINTER_QUEUE_WEIGHTS)`
	if err == nil || err.Error() != want {
		t.Fatalf("error:\n%v\nwant:\n%s", err, want)
	}
}

func TestPoliciesSettings(t *testing.T) {
	t.Parallel()
	cfg, err := LoadWith("testdata/policies_full.yaml", Options{Environ: []string{"SHAPER_DOWNSTREAMS_GQL_QUEUE_MAX_COST=8",
		"SHAPER_DOWNSTREAMS_GQL_QUEUE_KEY_CONCURRENCY=1"}})
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.ShaperSettings().Lanes[0].Policies
	want := shaper.Policies{MaxCost: 8, RejectWouldExpire: true, Shadow: true, AdmissionShadow: true,
		Adaptive: true, Fairness: true, KeyCapacity: 20, Weights: map[string]int{"Gold": 3, "silver": 2},
		Priorities: 1, MaxDelay: 24 * time.Hour, KeyConcurrency: 1}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Policies = %+v, want %+v", got, want)
	}
	next := cfg
	next.Downstreams = map[string]Downstream{"gql": cfg.Downstreams["gql"]}
	d := next.Downstreams["gql"]
	d.Queue.Fairness = FairnessNone
	next.Downstreams["gql"] = d
	if keys := RestartRequired(cfg, next); !reflect.DeepEqual(keys, []string{"downstreams.gql.queue.fairness"}) {
		t.Errorf("RestartRequired = %v, want the fairness key", keys)
	}
}

// TestPoliciesOnJetstream: priorities and fairness are accepted on the
// jetstream backend (the durable queue keeps them).
func TestPoliciesOnJetstream(t *testing.T) {
	t.Parallel()
	cfg, err := LoadWith("testdata/priorities_jetstream.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	ls := cfg.ShaperSettings().Lanes[0]
	if !ls.Durable || ls.Priorities != 3 || !ls.Fairness || ls.KeyCapacity != 4 {
		t.Fatalf("lane %+v, want durable with 3 levels, fairness and key capacity 4", ls)
	}
}
