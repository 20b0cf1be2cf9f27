package sink

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/shaperd/shaper/shaper/policy"
)

// A downstream's rate-limit headers (docs/policies.md "Learning the
// downstream's limit"), read on every answer:
//
//   - IETF draft-ietf-httpapi-ratelimit-headers, structured fields (RFC
//     9651 lists, read by httpsfv): RateLimit-Policy: "name";q=100;w=60 (q tries per w
//     seconds) and RateLimit: "name";r=42;t=30 (r left, refilled in t
//     seconds). Several policies: the most restrictive counts.
//   - The common X-RateLimit-Limit, -Remaining, -Reset, and the earlier
//     draft's RateLimit-Limit, -Remaining, -Reset. A limit may carry
//     policies ("100, 100;w=60"). A reset is delta seconds, or epoch
//     seconds when it is more than a year's worth of seconds (an epoch in
//     the past means now) — a delta that long is no real window, and
//     reading it so keeps a slightly stale epoch from pausing a lane.
//
// A field that is present but cannot be read is ignored and counted
// (Feedback.Malformed); for a structured field that is the whole field,
// as RFC 9651 says. Resets are cut to policy.MaxQuotaPause.
const (
	epochAfter = 365 * 24 * 3600 // seconds; a larger reset is an epoch time
	maxCount   = 1 << 40         // larger limits and counts are malformed
)

// policyRate is one advertised policy: limit tries per window (0 = not said).
type policyRate struct {
	limit  int
	window time.Duration
}

// readQuota reads h's rate-limit fields at now. It returns a nil quota when
// none was readable, and how many fields were present but malformed.
func readQuota(h http.Header, now time.Time) (*policy.Quota, int) {
	q := &policy.Quota{Remaining: -1, Reset: -1}
	var policies []policyRate
	bad := 0
	any := false
	note := func(ok, present bool) {
		any = any || ok
		if present && !ok {
			bad++
		}
	}
	ps, ok, present := ietfPolicies(h)
	note(ok, present)
	policies = append(policies, ps...)
	ok, present = ietfState(h, q)
	note(ok, present)
	for _, prefix := range []string{"X-RateLimit-", "RateLimit-"} {
		ps, ok, present = legacyLimit(h.Values(prefix + "Limit"))
		note(ok, present)
		policies = append(policies, ps...)
		n, ok, present := count(h.Values(prefix + "Remaining"))
		note(ok, present)
		if ok && (q.Remaining < 0 || n < q.Remaining) {
			q.Remaining = n
		}
		d, ok, present := reset(h.Values(prefix+"Reset"), now)
		note(ok, present)
		if ok {
			q.Reset = max(q.Reset, d)
		}
	}
	if !any {
		return nil, bad
	}
	strictest(q, policies)
	return q, bad
}

// strictest puts the policy with the lowest rate into q: among those with
// a window the lowest limit ÷ window, else the lowest limit.
func strictest(q *policy.Quota, policies []policyRate) {
	best := math.Inf(1)
	for _, p := range policies {
		switch {
		case p.window > 0:
			if r := float64(p.limit) / p.window.Seconds(); r < best || q.Window == 0 {
				best, q.Limit, q.Window = r, p.limit, p.window
			}
		case q.Window == 0 && (q.Limit == 0 || p.limit < q.Limit):
			q.Limit = p.limit
		}
	}
}

// ietfPolicies reads RateLimit-Policy: each item's q and w.
func ietfPolicies(h http.Header) (ps []policyRate, ok, present bool) {
	items, ok, present := sfList(h, "RateLimit-Policy")
	if !ok {
		return nil, false, present
	}
	for _, it := range items {
		q, okQ, _ := param(it, "q")
		w, okW, hasW := param(it, "w")
		if !okQ || (hasW && (!okW || w == 0)) {
			return nil, false, true
		}
		ps = append(ps, policyRate{limit: q, window: time.Duration(w) * time.Second})
	}
	return ps, true, true
}

// ietfState reads RateLimit into q: the item with the fewest r left (the
// longest t among equals).
func ietfState(h http.Header, q *policy.Quota) (ok, present bool) {
	items, ok, present := sfList(h, "RateLimit")
	if !ok {
		return false, present
	}
	best, reset := -1, time.Duration(-1)
	for _, it := range items {
		r, okR, _ := param(it, "r")
		t, okT, hasT := param(it, "t")
		if !okR || (hasT && !okT) {
			return false, true
		}
		d := time.Duration(-1)
		if okT {
			d = min(time.Duration(t)*time.Second, policy.MaxQuotaPause)
		}
		if best < 0 || r < best || (r == best && d > reset) {
			best, reset = r, d
		}
	}
	q.Remaining, q.Reset = best, reset
	return true, true
}

// sfList parses header field name as a structured-field list of items (an
// inner list is no rate-limit item). present is whether the field was sent;
// ok whether it parsed, to at least one item. (httpsfv, as RFC 9651 lets
// it, fails a byte sequence whose "=" padding is missing.)
func sfList(h http.Header, name string) (items []httpsfv.Item, ok, present bool) {
	vs := h.Values(name)
	if len(vs) == 0 {
		return nil, false, false
	}
	l, err := httpsfv.UnmarshalList(vs)
	if err != nil || len(l) == 0 {
		return nil, false, true
	}
	items = make([]httpsfv.Item, len(l))
	for i, m := range l {
		it, isItem := m.(httpsfv.Item)
		if !isItem {
			return nil, false, true
		}
		items[i] = it
	}
	return items, true, true
}

// param returns item parameter k as a count, a non-negative integer ≤
// maxCount (ok), and whether the item has k at all (has).
func param(it httpsfv.Item, k string) (n int, ok, has bool) {
	v, has := it.Params.Get(k)
	i, isInt := v.(int64)
	if !isInt || i < 0 || i > maxCount {
		return 0, false, has
	}
	return int(i), true, true
}

// legacyLimit reads an X-RateLimit-Limit: "100", or with policies
// "100, 100;w=60" (the first draft's form).
func legacyLimit(vs []string) (ps []policyRate, ok, present bool) {
	if len(vs) == 0 {
		return nil, false, false
	}
	for _, part := range strings.Split(strings.Join(vs, ","), ",") {
		num, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		n, err := strconv.Atoi(strings.TrimSpace(num))
		if err != nil || n < 0 || n > maxCount {
			return nil, false, true
		}
		p := policyRate{limit: n}
		for _, kv := range strings.Split(params, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
			if k != "w" {
				continue
			}
			w, err := strconv.Atoi(v)
			if err != nil || w <= 0 || w > epochAfter {
				return nil, false, true
			}
			p.window = time.Duration(w) * time.Second
		}
		ps = append(ps, p)
	}
	return ps, true, true
}

// count reads a single non-negative integer field.
func count(vs []string) (n int, ok, present bool) {
	if len(vs) == 0 {
		return 0, false, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(vs[0]))
	if len(vs) > 1 || err != nil || n < 0 || n > maxCount {
		return 0, false, true
	}
	return n, true, true
}

// reset reads a reset field: delta seconds (decimals allowed), or epoch
// seconds beyond epochAfter; cut to policy.MaxQuotaPause.
func reset(vs []string, now time.Time) (d time.Duration, ok, present bool) {
	if len(vs) == 0 {
		return 0, false, false
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(vs[0]), 64)
	if len(vs) > 1 || err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, false, true
	}
	if v > epochAfter {
		v = max(v-float64(now.UnixNano())/1e9, 0)
	}
	v = min(v, policy.MaxQuotaPause.Seconds())
	return time.Duration(v * float64(time.Second)), true, true
}
