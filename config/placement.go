package config

import (
	"github.com/shaperd/shaper/shaper"
)

// Placement places a jetstream downstream's stream (queue.placement): in
// the cluster named Cluster of a super-cluster, on servers with every tag
// of Tags. At least one of the two. docs/instances.md "Across regions".
type Placement struct {
	Cluster string   `mapstructure:"cluster"`
	Tags    []string `mapstructure:"tags"`
}

// validate checks queue.placement; p is "downstreams.NAME.queue.".
func (pl *Placement) validate(v validator, p string, backend string) {
	if pl == nil {
		return
	}
	k := p + "placement.cluster" // the section's key an operator sets first
	switch {
	case !v.ok(k):
	case backend != BackendJetStream:
		v.add(k, "queue.placement places a jetstream queue's stream; remove it, or set queue.backend: jetstream")
	case pl.Cluster == "" && len(pl.Tags) == 0:
		v.add(k, "queue.placement names no cluster and no tags; write e.g. { cluster: eu-west } or remove it")
	case !validName(pl.Cluster) && pl.Cluster != "":
		v.add(k, "%q is not a cluster name; use the name in the servers' cluster { name: ... }", pl.Cluster)
	}
	for _, t := range pl.Tags {
		if t == "" {
			v.add(p+"placement.tags", "has an empty tag; list the server_tags a server must have, e.g. [region:eu]")
			break
		}
	}
}

// settings is pl as the shaper's durable queues take it.
func (pl *Placement) settings() *shaper.Placement {
	if pl == nil {
		return nil
	}
	return &shaper.Placement{Cluster: pl.Cluster, Tags: append([]string(nil), pl.Tags...)}
}
