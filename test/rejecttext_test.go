package test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// Every rejection's error is one plain sentence, on both backends: it
// names the downstream (or, for an unknown one, the configured ones) and
// its bound once, says what would help, and shows none of the wrapped
// layers behind it (a store's raw NATS answer, package prefixes).
func TestRejectionErrorsArePlain(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"memory", "jetstream"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			rejectionsPlain(t, backend)
		})
	}
	t.Run("admission_store", func(t *testing.T) {
		t.Parallel()
		admissionStorePlain(t)
	})
}

// rejection is one refusal to provoke: the job sent, the reason and a
// part of the error that must be there; downstream, when not empty, must
// be named, and bound, when not empty, given once (or as often as want
// gives it, as in "(2/2)").
type rejection struct {
	name       string
	subject    string
	payload    []byte
	hdr        map[string]string
	before     int // jobs sent first, alike, each accepted
	reason     string
	want       string
	downstream string
	bound      string
}

func rejectionsPlain(t *testing.T, backend string) {
	srv := runNATS(t)
	ds := newDownstream(t)
	q := func(extra string) string { return "backend: " + backend + extra }
	lanes := []string{
		rejectLane("full", "10/s", q(", capacity: 2"), "", ds.URL),
		rejectLane("limited", "10/s", q(", capacity: 10, max_cost: 2"),
			"    admission: { mode: token_bucket, rate: 1/m, burst: 1 }\n", ds.URL),
		rejectLane("expire", "1/m", q(", capacity: 10, max_wait: 5s, reject_would_expire: true"), "", ds.URL),
		rejectLane("bytes", "10/s", q(", capacity: 10, max_bytes: 64KiB"), "", ds.URL),
		rejectLane("fair", "10/s", q(", capacity: 4, fairness: key, key_capacity: 1"), "", ds.URL),
	}
	cfg := baseConfig(lanes...) + "\ningress: { max_payload: 64KiB }\n"
	in := startDaemon(t, srv, cfg)
	for _, d := range []string{"full", "bytes", "fair"} {
		in.do(t, http.MethodPost, "/v1/downstreams/"+d+"/pause", http.StatusOK)
	}
	big := []byte(strings.Repeat("x", 40<<10))
	cases := []rejection{
		{name: "queue_full", subject: "full", before: 2, reason: "queue_full",
			want: "queue full is full (2/2)", downstream: "full", bound: "2"},
		{name: "queue_full_bytes", subject: "bytes", payload: big, before: 1, reason: "queue_full",
			want: "queue.max_bytes of 65536 bytes", downstream: "bytes", bound: "65536"},
		{name: "queue_full_key", subject: "fair", hdr: map[string]string{"Shaper-Key": "acme"}, before: 1,
			reason: "queue_full", want: `key "acme"`, downstream: "fair"},
		{name: "rate_limited", subject: "limited", hdr: map[string]string{"Shaper-Key": "acme"}, before: 1,
			reason: "rate_limited", want: `key "acme" has used up its admission rate`, downstream: "limited"},
		{name: "would_expire", subject: "expire", before: 1, reason: "would_expire",
			want: "past its max wait of 5s", downstream: "expire", bound: "5s"},
		{name: "unknown_downstream", subject: "nope", reason: "unknown_downstream",
			want: `no downstream named "nope" (configured: bytes, expire, fair, full, limited)`},
		{name: "unknown_subject", subject: "a.b", reason: "unknown_downstream", want: "publish to shaper.jobs.<downstream>"},
		{name: "payload_too_large", subject: "full", payload: make([]byte, 64<<10+1), reason: "payload_too_large",
			want: "payload of 65537 bytes", downstream: "full", bound: "65536"},
		{name: "bad_max_wait", subject: "full", hdr: map[string]string{"Shaper-Max-Wait": "soon"}, reason: "bad_request",
			want: `header Shaper-Max-Wait "soon" is not valid`},
		{name: "bad_cost", subject: "limited", hdr: map[string]string{"Shaper-Cost": "3"}, reason: "bad_request",
			want: "queue.max_cost 2", downstream: "limited"},
		{name: "cost_never_admitted", subject: "limited", hdr: map[string]string{"Shaper-Cost": "2", "Shaper-Key": "big"},
			reason: "bad_request", want: "admission limit can ever admit", downstream: "limited"},
		{name: "bad_priority", subject: "full", hdr: map[string]string{"Shaper-Priority": "3"}, reason: "bad_request",
			want: "queue.priorities 1", downstream: "full"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			subject := "shaper.jobs." + c.subject
			for i := range c.before {
				if r := in.request(t, subject, c.payload, c.hdr); r.Status != "accepted" {
					t.Fatalf("job %d before the refusal: %+v", i+1, r)
				}
			}
			checkPlain(t, c, in.request(t, subject, c.payload, c.hdr))
		})
	}
}

// admissionStorePlain: a fail-closed admission store (NATS KV) that is
// down answers unavailable in one sentence, without the store's error.
func admissionStorePlain(t *testing.T) {
	srv := runNATS(t)
	ds := newDownstream(t)
	cfg := baseConfig(rejectLane("kv", "10/s", "backend: memory, capacity: 10",
		"    admission: { mode: token_bucket, rate: 10/s, burst: 10, store: nats, fail_closed: true }\n", ds.URL))
	cfg = strings.Replace(cfg, `nats: { url: "%NATS%" }`,
		`nats: { url: "%NATS%", jetstream: { admission_timeout: 200ms } }`, 1)
	in := startDaemon(t, srv, cfg)
	hdr := map[string]string{"Shaper-Key": "acme"}
	if r := in.request(t, "shaper.jobs.kv", nil, hdr); r.Status != "accepted" {
		t.Fatalf("before the outage: %+v", r)
	}
	if err := srv.ShutdownJetStream(); err != nil {
		t.Fatal(err)
	}
	checkPlain(t, rejection{reason: "unavailable", want: "admission store of downstream kv did not answer", downstream: "kv"},
		in.request(t, "shaper.jobs.kv", nil, hdr))
}

// rejectLane is one downstream's YAML block with its queue settings.
func rejectLane(name, rate, queue, extra, url string) string {
	return fmt.Sprintf(`
  %s:
    rate: %s
    queue: { %s }
    sink:
      http: { url: %q, timeout: 2s }
%s`, name, rate, queue, url, extra)
}

// rawLayers are what a wrapped error chain or a store's raw answer shows.
var rawLayers = []string{"nats:", "API error", "err_code", "description=", "SHAPER_",
	"queue: ", "limiter: ", "admission: ", "natskv: ", "jetstream: ", "shaper: "}

// checkPlain checks a rejection's reply against c.
func checkPlain(t *testing.T, c rejection, r reply) {
	t.Helper()
	t.Logf("%s: %s", c.reason, r.Error)
	if r.Status != "rejected" || r.Reason != c.reason || r.Header.Get("Shaper-Reason") != c.reason {
		t.Fatalf("reply %s, want rejected %s", r.Body, c.reason)
	}
	e := r.Error
	if !strings.Contains(e, c.want) {
		t.Errorf("error %q does not say %q", e, c.want)
	}
	for _, raw := range rawLayers {
		if strings.Contains(e, raw) {
			t.Errorf("error %q shows a wrapped layer (%q)", e, raw)
		}
	}
	if n := strings.Count(e, ": "); n > 1 {
		t.Errorf("error %q is a chain of %d layers, want one sentence", e, n+1)
	}
	if strings.ContainsAny(e, "\n\r") || strings.TrimSpace(e) != e {
		t.Errorf("error %q is not one line", e)
	}
	if c.downstream != "" && !regexp.MustCompile(`\b`+c.downstream+`\b`).MatchString(e) {
		t.Errorf("error %q does not name downstream %s", e, c.downstream)
	}
	if c.bound != "" {
		word := regexp.MustCompile(`\b` + regexp.QuoteMeta(c.bound) + `\b`)
		if n, allowed := len(word.FindAllString(e, -1)), max(1, len(word.FindAllString(c.want, -1))); n > allowed {
			t.Errorf("error %q gives its bound %s %d times, want at most %d", e, c.bound, n, allowed)
		}
	}
}
