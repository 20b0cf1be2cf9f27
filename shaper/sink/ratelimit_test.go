package sink

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/policy"
)

func TestReadQuota(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	epoch := strconv.FormatInt(now.Unix(), 10)
	s := time.Second
	type q = policy.Quota
	for _, tc := range []struct {
		name string
		hdr  map[string][]string
		want *q // nil = no quota
		bad  int
	}{
		{"none", nil, nil, 0},
		{"ietf one policy", map[string][]string{
			"RateLimit-Policy": {`"default";q=100;w=60`}, "RateLimit": {`"default";r=42;t=30`}},
			&q{Limit: 100, Window: 60 * s, Remaining: 42, Reset: 30 * s}, 0},
		{"ietf several policies: the strictest", map[string][]string{
			"RateLimit-Policy": {`"day";q=1000000;w=86400, "burst";q=10;w=1`},
			"RateLimit":        {`"day";r=5000;t=3600, "burst";r=0;t=1`}},
			&q{Limit: 10, Window: s, Remaining: 0, Reset: s}, 0},
		{"ietf over two field lines, tokens, extra params", map[string][]string{
			"RateLimit-Policy": {`hourly;q=1000;w=3600;qu="requests"`, `minute;q=100;w=60;pk=:cHJvamVjdDEyMw==:`},
			"RateLimit":        {`minute;r=50;t=5;pk=:cHJvamVjdDEyMw==:`}},
			&q{Limit: 1000, Window: 3600 * s, Remaining: 50, Reset: 5 * s}, 0},
		{"ietf remaining only", map[string][]string{"RateLimit": {`"default";r=3`}},
			&q{Remaining: 3, Reset: -1}, 0},
		{"x-ratelimit delta", map[string][]string{
			"X-Ratelimit-Limit": {"20"}, "X-Ratelimit-Remaining": {"7"}, "X-Ratelimit-Reset": {"2"}},
			&q{Limit: 20, Remaining: 7, Reset: 2 * s}, 0},
		{"x-ratelimit epoch", map[string][]string{
			"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {"0"},
			"X-Ratelimit-Reset": {strconv.FormatInt(now.Unix()+90, 10)}},
			&q{Limit: 5000, Remaining: 0, Reset: 90 * s}, 0},
		{"x-ratelimit epoch in the past: now", map[string][]string{
			"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {epoch + ".0"}}, &q{Remaining: 0, Reset: 0}, 0},
		{"x-ratelimit decimal delta", map[string][]string{"X-Ratelimit-Reset": {"0.25"}},
			&q{Remaining: -1, Reset: s / 4}, 0},
		{"reset capped at an hour", map[string][]string{"X-Ratelimit-Reset": {"86400"}},
			&q{Remaining: -1, Reset: policy.MaxQuotaPause}, 0},
		{"limit with policies: the lowest rate", map[string][]string{"X-Ratelimit-Limit": {"100, 100;w=60, 10;w=1"}},
			&q{Limit: 100, Window: 60 * s, Remaining: -1, Reset: -1}, 0},
		{"earlier draft fields", map[string][]string{
			"Ratelimit-Limit": {"10"}, "Ratelimit-Remaining": {"4"}, "Ratelimit-Reset": {"1"}},
			&q{Limit: 10, Remaining: 4, Reset: s}, 0},
		{"fewest remaining of both families", map[string][]string{
			"RateLimit": {`"a";r=9;t=1`}, "X-Ratelimit-Remaining": {"2"}},
			&q{Remaining: 2, Reset: s}, 0},
		{"malformed remaining", map[string][]string{"X-Ratelimit-Limit": {"20"}, "X-Ratelimit-Remaining": {"lots"}},
			&q{Limit: 20, Remaining: -1, Reset: -1}, 1},
		{"negative and repeated", map[string][]string{
			"X-Ratelimit-Remaining": {"-1"}, "X-Ratelimit-Reset": {"1", "2"}, "X-Ratelimit-Limit": {"1e3"}}, nil, 3},
		{"malformed ietf fields", map[string][]string{
			"RateLimit-Policy": {`"default";q=100;w=0`}, "RateLimit": {`"default";r=1.5`}}, nil, 2},
		{"ietf syntax errors", map[string][]string{"RateLimit-Policy": {`"default";q=100,`}, "RateLimit": {`"x;r=1`}}, nil, 2},
		{"ietf missing q", map[string][]string{"RateLimit-Policy": {`"default";w=60`}}, nil, 1},
		{"ietf inner list", map[string][]string{"RateLimit": {`("a" "b");r=1`}}, nil, 1},
		// Shapes the hand-written parser this package had got wrong: RFC
		// 9651 dates and display strings are values it did not know, and a
		// byte sequence's "=" is padding only at its end.
		{"ietf date and display string parameters", map[string][]string{
			"RateLimit-Policy": {`"default";q=100;w=60;since=@1735689600;note=%"f%c3%bcr alle"`},
			"RateLimit":        {`"default";r=7;t=2;at=@1735689600`}},
			&q{Limit: 100, Window: 60 * s, Remaining: 7, Reset: 2 * s}, 0},
		{"ietf byte sequence padded in the middle", map[string][]string{
			"RateLimit": {`"default";r=7;t=2;pk=:cHJv=amVjdDEyMw==:`}}, nil, 1},
		{"one bad field, the others read", map[string][]string{
			"RateLimit-Policy": {`"p";q=30;w=1`}, "X-Ratelimit-Reset": {"soon"}},
			&q{Limit: 30, Window: s, Remaining: -1, Reset: -1}, 1},
		{"nan and inf", map[string][]string{"X-Ratelimit-Reset": {"NaN"}, "Ratelimit-Reset": {"+Inf"}}, nil, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, vs := range tc.hdr {
				for _, v := range vs {
					h.Add(k, v)
				}
			}
			got, bad := readQuota(h, now)
			switch {
			case bad != tc.bad:
				t.Errorf("malformed %d, want %d", bad, tc.bad)
			case (got == nil) != (tc.want == nil):
				t.Fatalf("quota %+v, want %+v", got, tc.want)
			case got != nil && *got != *tc.want:
				t.Errorf("quota %+v, want %+v", *got, *tc.want)
			}
		})
	}
}

// TestHTTPSinkFeedback: the quota is read on a success as on a refusal; a
// 429 with no Retry-After but nothing left until a reset is a pushback
// until the reset; a malformed Retry-After is counted.
func TestHTTPSinkFeedback(t *testing.T) {
	for _, tc := range []struct {
		name      string
		code      int
		hdr       map[string]string
		remaining int
		pushback  time.Duration // -1 = not a pushback
		bad       int
	}{
		{"200 with quota", 200, map[string]string{"X-RateLimit-Limit": "20", "X-RateLimit-Remaining": "19", "X-RateLimit-Reset": "1"}, 19, -1, 0},
		{"429 reset only", 429, map[string]string{"RateLimit": `"d";r=0;t=3`}, 0, 3 * time.Second, 0},
		{"429 retry-after wins", 429, map[string]string{"RateLimit": `"d";r=0;t=3`, "Retry-After": "5"}, 0, 5 * time.Second, 0},
		{"503 bad retry-after", 503, map[string]string{"Retry-After": "later", "X-RateLimit-Remaining": "4"}, 4, -1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSink(t, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.hdr {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.code)
			}, shaper.HTTPSinkSpec{})
			fb, err := s.Deliver(context.Background(), testJob())
			if fb.Quota == nil || fb.Quota.Remaining != tc.remaining || fb.Malformed != tc.bad {
				t.Fatalf("feedback %+v (quota %+v), want remaining %d, %d malformed", fb, fb.Quota, tc.remaining, tc.bad)
			}
			var pb *policy.PushbackError
			switch {
			case tc.pushback < 0 && errors.As(err, &pb):
				t.Errorf("err %v, want no pushback", err)
			case tc.pushback >= 0 && (!errors.As(err, &pb) || pb.RetryAfter != tc.pushback):
				t.Errorf("err %v, want a pushback of %v", err, tc.pushback)
			}
		})
	}
}

// BenchmarkReadQuota: the cost, on every answer, of reading the rate-limit
// fields of a few common shapes.
func BenchmarkReadQuota(b *testing.B) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, bc := range []struct {
		name string
		hdr  map[string]string
	}{
		{"none", map[string]string{"Content-Type": "application/json"}},
		{"ietf", map[string]string{
			"RateLimit-Policy": `"day";q=1000000;w=86400, "burst";q=10;w=1`,
			"RateLimit":        `"day";r=5000;t=3600, "burst";r=3;t=1`}},
		{"x-ratelimit", map[string]string{
			"X-RateLimit-Limit": "20", "X-RateLimit-Remaining": "7", "X-RateLimit-Reset": "2"}},
	} {
		h := http.Header{}
		for k, v := range bc.hdr {
			h.Set(k, v)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				readQuota(h, now)
			}
		})
	}
}
