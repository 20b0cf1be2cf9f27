package config

import (
	"time"

	"github.com/shaperd/shaper/limiter"
	"github.com/shaperd/shaper/shaper/admission"
)

// Admission stores (downstreams.NAME.admission.store).
const (
	AdmissionMemory = "memory" // this process; the default
	AdmissionNATS   = "nats"   // a JetStream KV bucket shared by every instance
)

// validateStore checks admission.store and its policies.
func (a Admission) validateStore(v validator, p string) {
	switch a.Store {
	case "", AdmissionMemory: // "" is memory, the default
		v.unusedStore(p+"fail_closed", a.FailClosed)
		v.unusedStore(p+"approximate", a.Approximate)
	case AdmissionNATS:
		mode := limiter.Mode(a.Mode)
		if k := p + "approximate"; v.ok(k) && v.ok(p+"mode") && a.Approximate &&
			mode != limiter.TokenBucketMode && mode != limiter.GCRAMode && a.Mode != "" {
			v.add(k, "is supported by modes token_bucket and gcra, not %s; remove it, or change the mode", a.Mode)
		}
	default:
		if k := p + "store"; v.ok(k) {
			v.add(k, "%q is not an admission store; use memory (this process) or nats (a JetStream KV bucket shared by every instance)", a.Store)
		}
	}
}

func (v validator) unusedStore(key string, set bool) {
	if v.ok(key) && set {
		v.add(key, "is only used with admission.store nats; remove it, or set store: nats")
	}
}

func validateAdmissionBucket(v validator, j JetStream) {
	if k := "nats.jetstream.admission_bucket"; v.ok(k) && (!validName(j.AdmissionBucket) || len(j.AdmissionBucket) > 64) {
		v.add(k, "%q is not a KV bucket name; use 1..64 letters, digits, - and _, e.g. SHAPER_ADMISSION", j.AdmissionBucket)
	}
	v.duration("nats.jetstream.admission_timeout", j.AdmissionTimeout, 10*time.Millisecond, 10*time.Second)
	if k := "nats.jetstream.rates_bucket"; v.ok(k) && (!validName(j.RatesBucket) || len(j.RatesBucket) > 64) {
		v.add(k, "%q is not a KV bucket name; use 1..64 letters, digits, - and _, e.g. SHAPER_RATES", j.RatesBucket)
	}
}

// store returns the shaper's view of admission.store; nil (no admission)
// and memory are the zero value.
func (a *Admission) store() admission.Store {
	if a == nil || a.Store == "" || a.Store == AdmissionMemory {
		return admission.Store{}
	}
	return admission.Store{Kind: a.Store, FailClosed: a.FailClosed, Approximate: a.Approximate}
}
