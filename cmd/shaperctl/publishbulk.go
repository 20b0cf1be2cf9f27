package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/shaperd/shaper/shaper/producer"
)

// maxBulk is the most jobs -bulk puts in one request: the top of the
// daemon's ingress.bulk.max_jobs range.
const maxBulk = 10000

// bulkOptions are publish's flags for bulk requests.
type bulkOptions struct {
	Bulk       int    // jobs per bulk request; 0 = one job per request
	BulkPrefix string // ingress.bulk.subject_prefix
	Atomic     bool   // Shaper-Bulk-Atomic: each request all or nothing
}

// defineBulkFlags binds publish's bulk flags to o.
func defineBulkFlags(fs *flag.FlagSet, o *bulkOptions) {
	fs.IntVar(&o.Bulk, "bulk", 0, "send the jobs `N` to a bulk request on <bulk-prefix>.<downstream> (0 = one job per request); "+
		"-rate still counts jobs, -concurrency requests")
	fs.StringVar(&o.BulkPrefix, "bulk-prefix", producer.DefaultBulkSubjectPrefix, "with -bulk: bulk subject prefix (ingress.bulk.subject_prefix)")
	fs.BoolVar(&o.Atomic, "atomic", false, "with -bulk: each request all or nothing (Shaper-Bulk-Atomic: true)")
}

// checkBulk returns what is wrong with publish's -bulk flags, or "".
func checkBulk(o publishOptions) string {
	switch {
	case o.Bulk < 0 || o.Bulk > maxBulk:
		return fmt.Sprintf("-bulk must be 1..%d jobs a request (the daemon's ingress.bulk.max_jobs, default 1000, bounds it), "+
			"or 0 for one job a request, got %d", maxBulk, o.Bulk)
	case o.Bulk == 0 && o.Atomic:
		return "-atomic needs -bulk N: it makes each bulk request all or nothing"
	case o.Bulk > 0 && o.Wait:
		return "-bulk and -wait exclude each other: -wait follows each job from its own request to its outcome; " +
			"drop -bulk to wait for outcomes, or -wait to send in bulk"
	case o.BulkPrefix == "" || strings.ContainsAny(o.BulkPrefix, " *>"):
		return fmt.Sprintf("-bulk-prefix %q is not a subject prefix; e.g. %s", o.BulkPrefix, producer.DefaultBulkSubjectPrefix)
	}
	return ""
}

// prefix is the subject prefix publish sends on: the bulk one with -bulk.
func (o publishOptions) prefix() string {
	if o.Bulk > 0 {
		return o.BulkPrefix
	}
	return o.SubjectPrefix
}

// sendBulk sends the jobs of rs (consecutive indexes) as one bulk request
// and fills rs with their answers. A payload that is JSON goes as "data",
// any other as "data_base64": the downstream receives the same bytes as it
// would from a single-job request.
func sendBulk(ctx context.Context, c *producer.Client, o publishOptions, rs []jobResult, t0 time.Time) {
	sentAt := time.Since(t0)
	jobs := make([]producer.BulkJob, len(rs))
	for k := range rs {
		i := rs[k].Index
		payload, opts := o.job(i)
		jobs[k] = producer.BulkJob{Data: payload, JSON: json.Valid(payload), Options: opts}
		rs[k] = jobResult{Index: i, Key: o.keyFor(i), Sent: true, SentAt: sentAt}
	}
	var opts []producer.Option
	if o.Atomic {
		opts = append(opts, producer.Atomic())
	}
	if o.NoReply {
		if err := c.PublishBulk(o.Downstream, jobs, opts...); err != nil {
			for k := range rs {
				rs[k].Err = errorKind(err)
			}
		}
		return
	}
	res, err := c.SubmitBulk(ctx, o.Downstream, jobs, opts...)
	var rej *producer.RejectedError
	for k := range rs {
		switch {
		case err == nil:
			record(&rs[k], res.Jobs[k].Result, res.Jobs[k].Err())
		case errors.As(err, &rej): // rejected whole: every job for the request's reason
			record(&rs[k], rej.Result, err)
		default:
			record(&rs[k], producer.Result{}, err)
		}
	}
}

// summarizeRun is summarize; with -bulk, the send rate counts the jobs of
// every request but the last over the time from the first request to the
// last, as the jobs of a request leave together.
func summarizeRun(o publishOptions, results []jobResult, wall time.Duration) publishSummary {
	s := summarize(o, results, wall)
	if o.Bulk > 0 {
		s.SendRate = bulkSendRate(results)
	}
	return s
}

// bulkSendRate is the send rate in jobs per second of requests that carry
// several jobs each (one SentAt per request); 0 with fewer than two
// requests.
func bulkSendRate(results []jobResult) float64 {
	var first, last time.Duration = -1, 0
	for _, r := range results {
		if r.Sent {
			if first < 0 || r.SentAt < first {
				first = r.SentAt
			}
			last = max(last, r.SentAt)
		}
	}
	before := 0 // the jobs of the requests before the last
	for _, r := range results {
		if r.Sent && r.SentAt < last {
			before++
		}
	}
	if first < 0 || last <= first {
		return 0
	}
	return float64(before) / (last - first).Seconds()
}
