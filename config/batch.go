package config

import (
	"cmp"
	"time"

	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/batch"
)

// Batch makes one start of a downstream one call carrying several jobs
// (downstreams.NAME.batch; docs/policies.md "Bulk downstreams"). Absent:
// one job per call.
type Batch struct {
	// MaxJobs is the most jobs in one call (a job's Shaper-Cost counts).
	MaxJobs int `mapstructure:"max_jobs"`
	// MaxBytes bounds the payload bytes of one call (0: 1MiB); a job
	// larger than it goes alone.
	MaxBytes ByteSize `mapstructure:"max_bytes"`
	// Linger is how long a call that could carry more waits for more
	// jobs; never past a job's max_wait.
	Linger time.Duration `mapstructure:"linger"`
	// Encoding is the call's body: json_array (the default), ndjson or
	// multipart.
	Encoding string `mapstructure:"encoding"`
}

// Bounds and defaults of downstreams.NAME.batch.
const (
	MinBatchJobs         = 2
	MaxBatchJobs         = 10000
	DefaultBatchBytes    = ByteSize(1 << 20)
	MaxBatchBytes        = ByteSize(64 << 20)
	MaxBatchLinger       = 10 * time.Second
	DefaultBatchEncoding = string(batch.JSONArray)
)

// validate checks b's keys; p is "downstreams.NAME.batch.".
func (b *Batch) validate(v validator, p string) {
	if b == nil {
		return
	}
	v.intRange(p+"max_jobs", b.MaxJobs, MinBatchJobs, MaxBatchJobs)
	if b.MaxBytes != 0 { // 0: DefaultBatchBytes
		v.size(p+"max_bytes", b.MaxBytes, 1, MaxBatchBytes)
	}
	v.duration(p+"linger", b.Linger, 0, MaxBatchLinger)
	if k := p + "encoding"; v.ok(k) {
		if _, err := batch.ParseEncoding(cmp.Or(b.Encoding, DefaultBatchEncoding)); err != nil {
			v.add(k, "%s", err.Error())
		}
	}
}

// settings is b as the shaper takes it; the zero value for no batch.
func (b *Batch) settings() shaper.BatchSettings {
	if b == nil {
		return shaper.BatchSettings{}
	}
	return shaper.BatchSettings{MaxJobs: b.MaxJobs, MaxBytes: int64(cmp.Or(b.MaxBytes, DefaultBatchBytes)), Linger: b.Linger,
		Encoding: cmp.Or(b.Encoding, DefaultBatchEncoding)}
}
