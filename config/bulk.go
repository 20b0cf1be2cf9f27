package config

// DefaultBulkPrefix is ingress.bulk.subject_prefix's default: bulk
// requests go to <prefix>.<downstream>.
const DefaultBulkPrefix = "shaper.bulk"

// Bounds and defaults of ingress.bulk.
const (
	DefaultBulkMaxJobs  = 1000
	MaxBulkJobs         = 10000
	DefaultBulkMaxBytes = 8 << 20
)

// Bulk configures bulk intake: many jobs in one request on
// <SubjectPrefix>.<downstream>, each taken as if it were sent alone.
type Bulk struct {
	// SubjectPrefix is where bulk requests come; "" turns bulk intake
	// off. A change needs a restart.
	SubjectPrefix string `mapstructure:"subject_prefix"`
	// MaxJobs bounds the jobs of one request (1..MaxBulkJobs).
	MaxJobs int `mapstructure:"max_jobs"`
	// MaxBytes bounds one request's body (up to MaxPayload, NATS's own
	// maximum); the embedded server's max_payload is raised to fit it.
	MaxBytes ByteSize `mapstructure:"max_bytes"`
}

// On reports whether bulk intake is on.
func (b Bulk) On() bool { return b.SubjectPrefix != "" }

// validateBulk checks ingress.bulk: a subject prefix of its own (not
// under the single-job intake's, whose subscription would take bulk
// requests as jobs, nor the status, events or queue subjects), the
// bounds, and a body bound no smaller than one job's.
func (c Config) validateBulk(v validator) {
	const pk = "ingress.bulk.subject_prefix"
	b := c.Ingress.Bulk
	v.subject(pk, b.SubjectPrefix, false)
	if b.On() && v.ok(pk) {
		c.notOtherPrefix(v, pk, b.SubjectPrefix, "bulk requests", DefaultBulkPrefix)
		in := c.Ingress
		for _, other := range []struct{ key, prefix string }{
			{"ingress.status_prefix", in.StatusPrefix}, {"ingress.events_prefix", in.EventsPrefix},
		} {
			if v.ok(pk) && other.prefix != "" && overlaps(b.SubjectPrefix, other.prefix) {
				v.add(pk, "%q overlaps %s %q; bulk requests need subjects of their own, e.g. %s",
					b.SubjectPrefix, other.key, other.prefix, DefaultBulkPrefix)
			}
		}
	}
	v.intRange("ingress.bulk.max_jobs", b.MaxJobs, 1, MaxBulkJobs)
	v.size("ingress.bulk.max_bytes", b.MaxBytes, 1, MaxPayload)
	if k := "ingress.bulk.max_bytes"; b.On() && v.ok(k) && c.Ingress.MaxPayload <= MaxPayload && b.MaxBytes < c.Ingress.MaxPayload {
		v.add(k, "%s is less than ingress.max_payload %s, so a request could not carry one job of the largest size; raise it to at least %s",
			b.MaxBytes, c.Ingress.MaxPayload, c.Ingress.MaxPayload)
	}
}
