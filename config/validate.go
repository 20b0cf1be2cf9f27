package config

import (
	"maps"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shaperd/shaper/limiter"
	"github.com/shaperd/shaper/shaper/settings"

	"golang.org/x/crypto/bcrypt"
)

// Bounds enforced by Validate; messages state them.
const (
	MinRate        = 1.0 / 3600       // per second (1/h), for downstream and admission rates
	MaxRate        = settings.MaxRate // per second
	MaxConcurrency = 10000
	MaxCapacity    = 1000000
	MaxBurst       = 1000000
	MaxLimit       = 1000000
	MaxAttempts    = 100
	MaxPayload     = 64 << 20 // NATS's own maximum
	MaxMaxWait     = 7 * 24 * time.Hour
	// MaxBcryptCost bounds admin.basic_auth.password_hash: every admin
	// request pays one bcrypt check, which doubles with each step of cost
	// (about 80 ms of CPU at cost 10, 0.3 s at 12, 1.3 s at 14).
	MaxBcryptCost = 12
)

// Validate reports every problem of c at once: errors.Join of *Problem, one
// line each, sorted by key, naming the key, the bad value, what would be
// valid and the env var. nil means c can run (whether this build supports
// queue.backend jetstream is the daemon's call, not Validate's).
func (c Config) Validate() error {
	var ps problems
	c.validate(&ps)
	return ps.err()
}

// validate adds c's problems to ps, staying quiet about keys ps already
// reported as undecodable.
func (c Config) validate(ps *problems) {
	v := validator{ps}
	c.validateNATS(v)
	c.Admin.validate(v)
	c.validateFiles(v)
	v.subject("ingress.subject_prefix", c.Ingress.SubjectPrefix, true)
	if k := "ingress.queue_group"; v.ok(k) && (c.Ingress.QueueGroup == "" || strings.ContainsFunc(c.Ingress.QueueGroup, isSpaceOrCtl)) {
		v.add(k, "must be a non-empty name without spaces, got %q", c.Ingress.QueueGroup)
	}
	if k := "ingress.key_header"; v.ok(k) && !validHeaderName(c.Ingress.KeyHeader) {
		v.add(k, "%q is not a header name; use letters, digits and -, e.g. Shaper-Key", c.Ingress.KeyHeader)
	}
	v.size("ingress.max_payload", c.Ingress.MaxPayload, 1, MaxPayload)
	v.duration("ingress.dedupe_window", c.Ingress.DedupeWindow, time.Second, 24*time.Hour)
	v.duration("shutdown_grace", c.ShutdownGrace, 0, time.Hour)
	if k := "tracing.parent"; v.ok(k) && c.Tracing.Parent != TraceParentProducer && c.Tracing.Parent != TraceParentLink {
		v.add(k, "%q is not a span parent; use producer (a child of the producer's span) or link (a new trace linked to it)", c.Tracing.Parent)
	}
	names := slices.Sorted(maps.Keys(c.Downstreams))
	envOwner := map[string]string{}
	for _, name := range names {
		key := "downstreams." + name
		if !validName(name) {
			if v.ok(key) {
				ps.addFileOnly(key, "%q is not a downstream name; use letters, digits, - and _", name)
			}
			continue
		}
		for _, lf := range dsLeaves { // two names must not share env vars
			env := EnvName(key + "." + lf.path)
			if other, dup := envOwner[env]; dup && lf.typ != headersType {
				ps.addFileOnly(key, "its env vars (%s) are also those of downstreams.%s; rename one", env, other)
				break
			}
			envOwner[env] = name
		}
		c.Downstreams[name].validate(v, key+".", c.Ingress.SubjectPrefix)
	}
	c.validateDeadLetters(v)
	c.validateOutcomes(v)
	c.validateStore(v)
}

func (c Config) validateNATS(v validator) {
	n := c.NATS
	c.validateSync(v)
	c.validateBulk(v)
	if n.URL == "" {
		v.listen("nats.embedded.listen", n.Embedded.Listen, true)
		if v.ok("nats.embedded.store_dir") && n.Embedded.StoreDir == "" {
			v.add("nats.embedded.store_dir", "required when nats.url is empty (embedded server); write e.g. ./data/nats")
		}
	} else if v.ok("nats.url") {
		for _, u := range strings.Split(n.URL, ",") {
			if !validNATSURL(strings.TrimSpace(u)) {
				v.add("nats.url", "%s is not a NATS URL; write e.g. nats://10.0.0.5:4222 (comma-separated for a cluster), or leave empty for an embedded server", redactURL(u))
				break
			}
		}
	}
	if n.Password != "" && n.User == "" {
		v.add("nats.password", "is set but nats.user is empty; set both, or use nats.token")
	}
	if n.Token != "" && (n.User != "" || n.Creds != "" || n.NKey != "") {
		v.add("nats.token", "cannot be combined with nats.user, nats.creds or nats.nkey; use one way to authenticate")
	}
	if n.Creds != "" && n.NKey != "" {
		v.add("nats.nkey", "cannot be combined with nats.creds (a creds file holds its own nkey); use one")
	}
	c.validateJetStream(v)
	if (n.TLS.Cert == "") != (n.TLS.Key == "") {
		v.add("nats.tls.cert", "nats.tls.cert and nats.tls.key go together; set both or neither")
	}
}

func (a Admin) validate(v validator) {
	v.listen("admin.listen", a.Listen, true)
	const user, hash = "admin.basic_auth.username", "admin.basic_auth.password_hash"
	ba := a.BasicAuth
	switch {
	case !v.ok(user) || !v.ok(hash):
	case ba.Username != "" && ba.PasswordHash == "":
		v.add(hash, "required when %s is set; write a bcrypt hash, e.g. from htpasswd -nbBC 10 USER PASSWORD", user)
	case ba.Username == "" && ba.PasswordHash != "":
		v.add(user, "required when %s is set", hash)
	case ba.Username == "":
	case strings.ContainsFunc(ba.Username, func(r rune) bool { return r == ':' || r < ' ' || r == 0x7f }):
		v.add(user, "%q cannot be a basic auth user name; it must not contain ':' or control characters", ba.Username)
	default:
		if cost, ok := bcryptCost(ba.PasswordHash); !ok {
			v.add(hash, "is not a bcrypt hash (60 characters starting $2a$, $2b$ or $2y$; the value is not shown); write one e.g. with htpasswd -nbBC 10 USER PASSWORD")
		} else if cost > MaxBcryptCost {
			v.add(hash, "bcrypt cost %d makes every admin request take seconds; use a cost of %d..%d (10 is usual)", cost, bcrypt.MinCost, MaxBcryptCost)
		}
	}
	const cert, key = "admin.tls.cert_file", "admin.tls.key_file"
	if v.ok(cert) && v.ok(key) && (a.TLS.CertFile == "") != (a.TLS.KeyFile == "") {
		missing, set := key, cert
		if a.TLS.CertFile == "" {
			missing, set = cert, key
		}
		v.add(missing, "required when %s is set; set both or neither (neither serves plain HTTP)", set)
	}
}

// bcryptCost returns the cost of a bcrypt hash; ok is false if h is not one.
func bcryptCost(h string) (cost int, ok bool) {
	if len(h) != 60 || !(strings.HasPrefix(h, "$2a$") || strings.HasPrefix(h, "$2b$") || strings.HasPrefix(h, "$2y$")) {
		return 0, false
	}
	cost, err := bcrypt.Cost([]byte(h))
	return cost, err == nil
}

func (c Config) validateJetStream(v validator) {
	j := c.NATS.JetStream
	if k := "nats.jetstream.stream_prefix"; v.ok(k) && (!validName(j.StreamPrefix) || len(j.StreamPrefix) > 32) {
		v.add(k, "%q is not a stream name prefix; use 1..32 letters, digits, - and _, e.g. SHAPER", j.StreamPrefix)
	}
	v.subject("nats.jetstream.subject_prefix", j.SubjectPrefix, true)
	if k := "nats.jetstream.subject_prefix"; v.ok(k) && c.Ingress.SubjectPrefix != "" {
		p, q := j.SubjectPrefix, c.Ingress.SubjectPrefix
		if p == q || strings.HasPrefix(p, q+".") || strings.HasPrefix(q, p+".") {
			v.add(k, "%q overlaps ingress.subject_prefix %q, so stored jobs would loop back into the intake; use another subject, e.g. shaper.queue", p, q)
		}
	}
	if k := "nats.jetstream.replicas"; v.ok(k) && (j.Replicas < 1 || j.Replicas > 5) {
		v.add(k, "must be 1..5 (3 for a 3-node cluster), got %d", j.Replicas)
	}
	if k := "nats.jetstream.storage"; v.ok(k) && j.Storage != "file" && j.Storage != "memory" {
		v.add(k, "%q is not a storage type; use file (survives a NATS restart) or memory", j.Storage)
	}
	v.duration("nats.jetstream.ack_wait", j.AckWait, time.Second, time.Hour)
	v.duration("nats.jetstream.pinned_ttl", j.PinnedTTL, time.Second, time.Hour)
	validateAdmissionBucket(v, j)
}

func (d Downstream) validate(v validator, p, prefix string) {
	v.rate(p+"rate", d.Rate)
	v.intRange(p+"concurrency", d.Concurrency, 1, MaxConcurrency)
	v.intRange(p+"queue.capacity", d.Queue.Capacity, 1, MaxCapacity)
	if k := p + "queue.backend"; v.ok(k) && d.Queue.Backend != BackendJetStream && d.Queue.Backend != BackendMemory {
		v.add(k, "%q is not a queue backend; use jetstream or memory", d.Queue.Backend)
	}
	v.duration(p+"queue.max_wait", d.Queue.MaxWait, 0, MaxMaxWait)
	v.intRange(p+"queue.priorities", d.Queue.Priorities, 1, settings.MaxPriorities)
	v.duration(p+"queue.max_delay", d.Queue.MaxDelay, time.Millisecond, settings.MaxMaxDelay)
	d.validatePolicies(v, p)
	if k := p + "maintenance"; v.ok(k) {
		if _, err := d.Maintenance.Parse(); err != nil {
			v.add(k, "%s", err.Error())
		}
	}
	d.validateBreaker(v, p)
	if d.Admission != nil {
		d.Admission.validate(v, p+"admission.")
	}
	d.Batch.validate(v, p+"batch.")
	d.Queue.Placement.validate(v, p+"queue.", d.Queue.Backend)
	d.Sink.validate(v, p+"sink", prefix)
	v.intRange(p+"retry.max_attempts", d.Retry.MaxAttempts, 1, MaxAttempts)
	v.duration(p+"retry.initial_backoff", d.Retry.InitialBackoff, time.Millisecond, time.Hour)
	v.duration(p+"retry.max_backoff", d.Retry.MaxBackoff, time.Millisecond, 24*time.Hour)
	if k := p + "retry.initial_backoff"; v.ok(k) && v.ok(p+"retry.max_backoff") && d.Retry.InitialBackoff > d.Retry.MaxBackoff {
		v.add(k, "%s is more than retry.max_backoff %s; make it at most that", FormatDuration(d.Retry.InitialBackoff), FormatDuration(d.Retry.MaxBackoff))
	}
	if d.DeadLetter != "" {
		v.subject(p+"dead_letter", d.DeadLetter, true)
		v.notIngress(p+"dead_letter", d.DeadLetter, prefix)
	}
}

func (a Admission) validate(v validator, p string) {
	if a.Limits != nil || v.ps.isBad(p+"limits") {
		a.validateLimits(v, p)
	} else {
		a.single().validate(v, p)
	}
	a.validateStore(v, p)
	if a.MaxKeys != 0 {
		v.intRange(p+"max_keys", a.MaxKeys, 1, limiter.MaxMaxKeys)
	}
}

func (s Sink) validate(v validator, key, prefix string) {
	switch {
	case !v.ok(key):
		return
	case s.HTTP == nil && s.NATS == nil:
		v.ps.addFileOnly(key, "required; set sink.http.url or sink.nats.subject (env %s or %s)", EnvName(key+".http.url"), EnvName(key+".nats.subject"))
		return
	case s.HTTP != nil && s.NATS != nil:
		v.ps.addFileOnly(key, "has both http and nats; keep exactly one")
		return
	case s.NATS != nil:
		v.subject(key+".nats.subject", s.NATS.Subject, true)
		v.notIngress(key+".nats.subject", s.NATS.Subject, prefix)
		v.duration(key+".nats.timeout", s.NATS.Timeout, time.Millisecond, time.Hour)
		return
	}
	h := s.HTTP
	if k := key + ".http.url"; v.ok(k) {
		if u, err := url.Parse(h.URL); h.URL == "" {
			v.add(k, "required; write e.g. http://127.0.0.1:8080/print")
		} else if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add(k, "%s is not an absolute http or https URL; write e.g. http://127.0.0.1:8080/print", redactURL(h.URL))
		}
	}
	if k := key + ".http.method"; v.ok(k) && !slices.Contains([]string{"POST", "PUT", "PATCH"}, h.Method) {
		v.add(k, "%q is not allowed (the job is the request body); use POST, PUT or PATCH", h.Method)
	}
	v.duration(key+".http.timeout", h.Timeout, time.Millisecond, time.Hour)
	for _, name := range slices.Sorted(maps.Keys(h.Headers)) {
		k := key + ".http.headers." + name
		if !v.ok(k) {
			continue
		}
		if !validHeaderName(name) {
			v.add(k, "%q is not a header name; use letters, digits and -", name)
		} else if strings.ContainsAny(h.Headers[name], "\r\n\x00") {
			v.add(k, "the value must not contain line breaks or NUL")
		}
	}
}

// validator adds range and syntax checks to problems, skipping keys that
// already failed to decode. Each message states what would be valid.
type validator struct{ ps *problems }

func (v validator) ok(key string) bool { return !v.ps.isBad(key) }

func (v validator) add(key, format string, args ...any) { v.ps.add(key, format, args...) }

func (v validator) rate(key string, r Rate) {
	switch f := float64(r); {
	case !v.ok(key):
	case f == 0:
		v.add(key, "required; write e.g. 2/s or 120/m")
	case !(f >= MinRate) || math.IsInf(f, 0) || f > MaxRate:
		v.add(key, "must be 1/h..1000000/s, got %s", r)
	}
}

func (v validator) intRange(key string, n, lo, hi int) {
	if v.ok(key) && (n < lo || n > hi) {
		v.add(key, "must be %d..%d, got %d", lo, hi, n)
	}
}

func (v validator) duration(key string, d, lo, hi time.Duration) {
	if v.ok(key) && (d < lo || d > hi) {
		v.add(key, "must be %s..%s, got %s", FormatDuration(lo), FormatDuration(hi), FormatDuration(d))
	}
}

func (v validator) size(key string, b, lo, hi ByteSize) {
	if v.ok(key) && (b < lo || b > hi) {
		v.add(key, "must be %s..%s, got %s", lo, hi, b)
	}
}

func (v validator) unused(key string, set bool, mode, modes string) {
	if v.ok(key) && set {
		v.add(key, "is not used by mode %s; remove it, or use mode %s", mode, modes)
	}
}

func (v validator) listen(key, addr string, required bool) {
	if !v.ok(key) || (addr == "" && !required) {
		return
	}
	host, port, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil || n < 0 || n > 65535 || strings.ContainsFunc(host, isSpaceOrCtl) {
		v.add(key, "%q is not a listen address; write host:port, e.g. 127.0.0.1:9090", addr)
	}
}

// subject checks a NATS subject (or subject prefix) for literal use:
// dot-separated non-empty tokens, no wildcards, no spaces.
func (v validator) subject(key, s string, required bool) {
	if !v.ok(key) || (s == "" && !required) {
		return
	}
	if s == "" {
		v.add(key, "required; write a NATS subject, e.g. shaper.jobs")
		return
	}
	if !literalSubject(s) {
		v.add(key, "%q is not a NATS subject without wildcards; use dot-separated tokens without spaces, * or >, e.g. shaper.jobs", s)
	}
}

// notIngress refuses a subject the daemon itself consumes: publishing there
// would feed jobs back into the intake.
func (v validator) notIngress(key, s, prefix string) {
	if v.ok(key) && prefix != "" && (s == prefix || strings.HasPrefix(s, prefix+".")) {
		v.add(key, "%q is under ingress.subject_prefix %q, so jobs would loop back into the intake; use another subject", s, prefix)
	}
}

func isSpaceOrCtl(r rune) bool { return r <= ' ' || r == 0x7f }

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

func validNATSURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return false
	}
	switch u.Scheme {
	case "nats", "tls", "ws", "wss":
		return true
	}
	return false
}

// maskURL returns s with the user part of the URL replaced by REDACTED (a
// lone user part may be a token); ok is false when s does not parse and
// may hold credentials.
func maskURL(s string) (masked string, ok bool) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return s, !strings.Contains(s, "@")
	}
	if u.User == nil {
		return s, true
	}
	u.User = url.User(redacted)
	return u.String(), true
}

// redactURL quotes a URL for a message, credentials masked.
func redactURL(s string) string {
	if m, ok := maskURL(s); ok {
		return quote(m)
	}
	return "the value (hidden: it may hold credentials)"
}
