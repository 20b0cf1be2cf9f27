package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/spf13/viper"

	"github.com/shaperd/shaper/limiter"
)

// downstreams.NAME.admission.limits: several limits at once. It is the one
// list in the config. Its items are checked, decoded and reported like
// sections, under keys such as downstreams.NAME.admission.limits[0].rate
// (0-based), but they are read from the file only: viper maps env vars to
// key paths, and a path cannot name a list item. An env var that would
// (SHAPER_DOWNSTREAMS_NAME_ADMISSION_LIMITS...) is reported, never ignored.

// MaxLimits is the most limits one admission rule may hold.
const MaxLimits = 4

var (
	limitsType  = reflect.TypeFor[[]Limit]()
	limitType   = reflect.TypeFor[Limit]()
	limitLeaves = leavesOf(limitType)
)

// itemKey is the key of list item i under key: key[i].
func itemKey(key string, i int) string { return fmt.Sprintf("%s[%d]", key, i) }

// checkLimits reports a limits value that is not a list of mappings and
// unknown keys in its items.
func (l *loader) checkLimits(path string, raw any) {
	list, ok := raw.([]any)
	if !ok {
		l.probs.addFileOnly(path, "expected a list of limits, each a mapping with keys %s, got %s", strings.Join(keysOf(limitType), ", "), describe(path, raw))
		l.probs.markBad(path)
		return
	}
	for i, item := range list {
		key := itemKey(path, i)
		m, ok := item.(map[string]any)
		if !ok {
			l.probs.addFileOnly(key, "expected a mapping with keys %s, got %s", strings.Join(keysOf(limitType), ", "), describe(key, item))
			l.probs.markBad(key)
			continue
		}
		for _, k := range sortedKeys(m) {
			if f, ok := fieldByKey(limitType, k); !ok {
				l.unknown(key+"."+k, limitType)
			} else {
				l.check(key+"."+k, m[k], f.Type)
			}
		}
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// decodeLimits decodes the file's list at key (a path below raw, the
// downstream's mapping) into field, item by item and key by key. A present
// list decodes to a non-nil slice, even when empty.
func (l *loader) decodeLimits(prefix, path string, raw map[string]any, field reflect.Value) {
	key := prefix + path
	list, ok := lookupPath(raw, path).([]any)
	if !ok || l.probs.isBad(key) {
		return
	}
	limits := make([]Limit, len(list))
	for i, item := range list {
		m, _ := item.(map[string]any)
		lv := reflect.ValueOf(&limits[i]).Elem()
		for _, lf := range limitLeaves {
			if val, ok := m[lf.path]; ok {
				l.decodeValue(itemKey(key, i)+"."+lf.path, val, settable(lv, lf.index))
			}
		}
	}
	field.Set(reflect.ValueOf(limits))
}

// decodeValue is decodeKey for a value that is not in viper (a list item's):
// the same hook and the same messages.
func (l *loader) decodeValue(key string, raw any, field reflect.Value) {
	if raw == nil || l.probs.isBad(key) {
		return
	}
	sv := viper.New()
	sv.Set("v", raw)
	l.unmarshal(key, sv, "v", raw, field)
}

// checkLimitsEnv reports every env var that names downstreams.NAME.admission.limits
// or a key below it: such a var cannot set anything, and silently ignoring
// it would hide a mistake.
func (l *loader) checkLimitsEnv(environ []string) {
	for _, name := range l.names {
		key := "downstreams." + name + ".admission.limits"
		env := EnvName(key)
		for _, kv := range environ {
			k, val, _ := strings.Cut(kv, "=")
			if val != "" && (k == env || strings.HasPrefix(k, env+"_")) {
				l.probs.addFileOnly(key, "cannot be set by env (%s is set): a list item has no env var; write the limits in the config file, or unset it", k)
			}
		}
	}
}

// validateLimits checks admission.limits (a non-nil a.Limits); p is
// "downstreams.NAME.admission.".
func (a Admission) validateLimits(v validator, p string) {
	key := p + "limits"
	if !v.ok(key) {
		return
	}
	var single []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"mode", a.Mode != ""}, {"rate", a.Rate != 0}, {"burst", a.Burst != 0}, {"limit", a.Limit != 0}, {"window", a.Window != 0}} {
		if f.set {
			single = append(single, f.name)
		}
	}
	if len(single) > 0 {
		v.ps.addFileOnly(key, "is set, and so is the single-limit form (admission.%s); keep one: move that limit into the list, or remove limits", strings.Join(single, ", admission."))
	}
	if len(a.Limits) < 1 || len(a.Limits) > MaxLimits {
		v.ps.addFileOnly(key, "must hold 1..%d limits, got %d", MaxLimits, len(a.Limits))
	}
	if k := p + "store"; v.ok(k) && a.Store == AdmissionNATS {
		v.add(k, "nats cannot hold admission.limits (a shared store cannot refund one limit when another rejects); use store: memory, or a single limit")
	}
	for i, lim := range a.Limits {
		lim.validate(v, itemKey(key, i)+".")
	}
}

// validate checks one limit; p is the prefix of its keys.
func (lim Limit) validate(v validator, p string) {
	switch limiter.Mode(lim.Mode) {
	case limiter.TokenBucketMode, limiter.GCRAMode:
		v.rate(p+"rate", lim.Rate)
		v.intRange(p+"burst", lim.Burst, 1, MaxBurst)
		v.unused(p+"limit", lim.Limit != 0, lim.Mode, "fixed_window, sliding_log or sliding_counter")
		v.unused(p+"window", lim.Window != 0, lim.Mode, "fixed_window, sliding_log or sliding_counter")
	case limiter.FixedWindowMode, limiter.SlidingLogMode, limiter.SlidingCounterMode:
		v.intRange(p+"limit", lim.Limit, 1, MaxLimit)
		v.duration(p+"window", lim.Window, time.Millisecond, 24*time.Hour)
		v.unused(p+"rate", lim.Rate != 0, lim.Mode, "token_bucket or gcra")
		v.unused(p+"burst", lim.Burst != 0, lim.Mode, "token_bucket or gcra")
	default:
		if v.ok(p + "mode") {
			v.add(p+"mode", "%q is not an admission mode; use token_bucket, gcra, fixed_window, sliding_log or sliding_counter", lim.Mode)
		}
	}
}

// single returns the single-limit form of a.
func (a Admission) single() Limit {
	return Limit{Mode: a.Mode, Rate: a.Rate, Burst: a.Burst, Limit: a.Limit, Window: a.Window}
}

// limiterConfig returns the limiter's config of lim. Only the fields of the
// mode are copied, so the limiter never sees a stray value.
func (lim Limit) limiterConfig() limiter.Config {
	lc := limiter.Config{Mode: limiter.Mode(lim.Mode)}
	switch lc.Mode {
	case limiter.TokenBucketMode, limiter.GCRAMode:
		lc.Rate, lc.Burst = float64(lim.Rate), lim.Burst
	default:
		lc.Limit, lc.Window = lim.Limit, lim.Window
	}
	return lc
}

// limiterConfigs returns the limiters of admission.limits; nil for none or
// the single-limit form.
func (a *Admission) limiterConfigs() []limiter.Config {
	if a == nil || a.Limits == nil {
		return nil
	}
	out := make([]limiter.Config, len(a.Limits))
	for i, lim := range a.Limits {
		out[i] = lim.limiterConfig()
		out[i].MaxKeys = a.MaxKeys
	}
	return out
}

// writeLimits writes each item's set keys as key[i].field: value.
func writeLimits(b *strings.Builder, key string, v reflect.Value) {
	for i := range v.Len() {
		writeKeys(b, itemKey(key, i)+".", v.Index(i), limitLeaves)
	}
}
