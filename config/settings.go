package config

import (
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/shaperd/shaper/limiter"
	"github.com/shaperd/shaper/shaper"
)

// ShaperSettings converts c into the shaper's settings: one lane per
// downstream, sorted by name so equal configs give equal settings. c should
// have passed Validate; ShaperSettings does not check it again. Header names
// are canonicalized (viper lower-cases keys; HTTP names are case-insensitive).
func (c Config) ShaperSettings() shaper.Settings {
	s := shaper.Settings{ShutdownGrace: c.ShutdownGrace,
		Tracing: shaper.TracingSettings{Link: c.Tracing.Parent == TraceParentLink, SubjectPrefix: c.Ingress.SubjectPrefix}}
	for _, name := range slices.Sorted(maps.Keys(c.Downstreams)) {
		d := c.Downstreams[name]
		s.Lanes = append(s.Lanes, shaper.LaneSettings{
			Name:        name,
			Rate:        float64(d.Rate),
			Concurrency: d.Concurrency,
			Capacity:    d.Queue.Capacity,
			MaxWait:     d.Queue.MaxWait,
			Admission:   d.Admission.limiterConfig(),
			Retry: shaper.RetryPolicy{
				MaxAttempts:    d.Retry.MaxAttempts,
				InitialBackoff: d.Retry.InitialBackoff,
				MaxBackoff:     d.Retry.MaxBackoff,
			},
			Sink:        d.Sink.spec(),
			DeadLetter:  d.DeadLetterSubject(name),
			DeadLetters: shaper.DeadLetterLimits{MaxAge: d.DeadLetters.MaxAge, MaxCount: d.DeadLetters.MaxCount},
			Durable:     d.Queue.Backend == BackendJetStream,
			MaxBytes:    int64(d.Queue.MaxBytes),
			Policies:    d.policies(),
			Breaker:     d.breaker(),
			Maintenance: d.maintenance(),
			Outcomes:    d.Outcomes.settings(),
			Batch:       d.Batch.settings(),
			Placement:   d.Queue.Placement.settings(),

			AdmissionStore: d.Admission.store(),
		})
	}
	return s
}

// limiterConfig returns nil for no admission control or for several
// limits (limiterConfigs).
func (a *Admission) limiterConfig() *limiter.Config {
	if a == nil || a.Limits != nil {
		return nil
	}
	lc := a.single().limiterConfig()
	lc.MaxKeys = a.MaxKeys
	return &lc
}

func (s Sink) spec() shaper.SinkSpec {
	var spec shaper.SinkSpec
	if h := s.HTTP; h != nil {
		hdr := make(http.Header, len(h.Headers))
		for k, v := range h.Headers {
			hdr.Set(k, v)
		}
		spec.HTTP = &shaper.HTTPSinkSpec{URL: h.URL, Method: h.Method, Timeout: h.Timeout, Headers: hdr}
	}
	if n := s.NATS; n != nil {
		spec.NATS = &shaper.NATSSinkSpec{Subject: n.Subject, Request: n.Request, Timeout: n.Timeout}
	}
	return spec
}

// RestartRequired returns the keys that differ between old and next and
// cannot change while running, sorted: every changed nats.* and admin.*
// key, ingress.subject_prefix, ingress.queue_group, ingress.status_prefix,
// ingress.events_prefix, and
// downstreams.NAME.queue.backend for a downstream in both configs. Adding
// or removing a downstream is not listed. nil means next can be applied in
// place.
func RestartRequired(old, next Config) []string {
	var keys []string
	ov, nv := reflect.ValueOf(old), reflect.ValueOf(next)
	for _, lf := range configLeaves {
		if !restartKey(lf.path) {
			continue
		}
		a, _ := lookup(ov, lf.index)
		b, _ := lookup(nv, lf.index)
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			keys = append(keys, lf.path)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(old.Downstreams)) {
		if n, ok := next.Downstreams[name]; ok && n.Queue.Backend != old.Downstreams[name].Queue.Backend {
			keys = append(keys, "downstreams."+name+".queue.backend")
		}
		if n, ok := next.Downstreams[name]; ok && n.Queue.Fairness != old.Downstreams[name].Queue.Fairness {
			keys = append(keys, "downstreams."+name+".queue.fairness")
		}
	}
	slices.Sort(keys)
	return keys
}

func restartKey(path string) bool {
	switch path {
	case "ingress.subject_prefix", "ingress.queue_group", "ingress.status_prefix", "ingress.events_prefix", "ingress.bulk.subject_prefix", "tracing.parent":
		return true
	}
	return strings.HasPrefix(path, "nats.") || strings.HasPrefix(path, "admin.")
}
