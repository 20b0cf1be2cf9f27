package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/config"
	"github.com/shaperd/shaper/shaper/producer"
)

const defaultPayload = `{"job":{i},"from":"shaperctl"}`

var subjectToken = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// publishOptions are the parsed flags of publish.
type publishOptions struct {
	Downstream    string
	N             int
	Rate          float64 // jobs per second; 0 = as fast as possible
	Concurrency   int
	Key           string
	Keys          int
	KeyHeader     string
	Payload       string // {i} is replaced by the job index
	MaxWait       time.Duration
	Priority      int           // Shaper-Priority; -1 = not set
	Delay         time.Duration // Shaper-Delay; 0 = not set
	NotBefore     time.Time     // Shaper-Not-Before; zero = not set
	MsgIDPrefix   string
	NATSURL       string
	SubjectPrefix string
	Timeout       time.Duration
	NoReply       bool
	Wait          bool          // SubmitAndWait: wait for each job's outcome
	WaitTimeout   time.Duration // with Wait: how long to wait for one job's outcome
	StatusPrefix  string        // with Wait: the status look-ups' prefix
	JSON          bool
	Verbose       bool
	bulkOptions   // -bulk, -bulk-prefix, -atomic
}

func (o publishOptions) subject() string { return o.prefix() + "." + o.Downstream }

// keyFor is the admission key of job i: -key, or key-(i mod -keys), or none.
func (o publishOptions) keyFor(i int) string {
	if o.Keys > 0 {
		return "key-" + strconv.Itoa(i%o.Keys)
	}
	return o.Key
}

// job builds job i: its payload and the options for its headers.
func (o publishOptions) job(i int) ([]byte, []producer.Option) {
	payload := []byte(strings.ReplaceAll(o.Payload, "{i}", strconv.Itoa(i)))
	opts := []producer.Option{producer.Key(o.keyFor(i))}
	if o.MsgIDPrefix != "" {
		opts = append(opts, producer.MsgID(o.MsgIDPrefix+strconv.Itoa(i)))
	}
	if o.MaxWait > 0 {
		opts = append(opts, producer.MaxWait(o.MaxWait))
	}
	if o.Priority >= 0 {
		opts = append(opts, producer.Priority(o.Priority))
	}
	if o.Delay > 0 {
		opts = append(opts, producer.Delay(o.Delay))
	}
	if !o.NotBefore.IsZero() {
		opts = append(opts, producer.NotBefore(o.NotBefore))
	}
	return payload, opts
}

func cmdPublish(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, code, ok := parsePublishFlags(args, stderr)
	if !ok {
		return code
	}
	nc, err := nats.Connect(o.NATSURL, nats.Name("shaperctl publish"), nats.Timeout(o.Timeout))
	if err != nil {
		fmt.Fprintf(stderr, "shaperctl publish: cannot connect to NATS at %s: %v\nis shaperd running? is -nats right?\n", o.NATSURL, err)
		return exitFailed
	}
	defer nc.Close()
	client, err := producer.New(nc, producer.SubjectPrefix(o.SubjectPrefix), producer.StatusPrefix(o.StatusPrefix),
		producer.BulkSubjectPrefix(o.BulkPrefix), producer.KeyHeader(o.KeyHeader), producer.Timeout(o.Timeout))
	if err != nil {
		return usageErr(stderr, "publish", "%v", err)
	}
	results, wall := publishJobs(ctx, client, o)
	if o.NoReply {
		if err := nc.FlushTimeout(o.Timeout); err != nil {
			fmt.Fprintf(stderr, "shaperctl publish: flush to %s: %v; is -nats right?\n", o.NATSURL, err)
			return exitFailed
		}
	}
	sum := summarizeRun(o, results, wall)
	if err := writeSummary(stdout, o, sum, results); err != nil {
		fmt.Fprintf(stderr, "shaperctl publish: %v\n", err)
		return exitFailed
	}
	if sum.NoAnswer > 0 {
		what := "got no answer"
		if o.NoReply {
			what = "failed to publish"
		}
		fmt.Fprintf(stderr, "shaperctl publish: %d of %d jobs %s (%s): is shaperd running? is -nats right?\n",
			sum.NoAnswer, sum.Jobs, what, formatCounts(sum.NoAnswerBy, "="))
		return exitFailed
	}
	if sum.NoOutcome > 0 {
		fmt.Fprintf(stderr, "shaperctl publish: %d of %d accepted jobs did not end within -wait-timeout %s (%s): "+
			"raise -wait-timeout, or look them up with 'shaperctl job'\n",
			sum.NoOutcome, sum.Accepted, o.WaitTimeout, formatCounts(sum.NoOutcomeBy, "="))
		return exitFailed
	}
	return exitOK
}

func parsePublishFlags(args []string, stderr io.Writer) (publishOptions, int, bool) {
	fs := newFlagSet("publish", "-downstream NAME [-n N] [-rate 50/s] [flags]", `Sends N jobs to <subject-prefix>.<downstream> by NATS request/reply, as a producer
would, and prints what the daemon answered: accepted (with queue positions and
ETAs), rejected by reason, the Retry-After values seen, duplicates, and jobs that
got no answer. Sends follow an absolute schedule (t0 + k/rate).
With -wait, each job also asks for its outcome (Shaper-Reply-To) and is waited
for until it ends, at most -wait-timeout: the summary adds the accepted jobs by
final state (succeeded, failed, expired, dropped) and the accepted→ended latency
p50/p99 (from send to outcome). A worker holds its job until it ends, so
-concurrency bounds the jobs waited for at once; raise it to keep -rate.
With -bulk N, the jobs go N to a request on <bulk-prefix>.<downstream> (the
last may hold fewer) and are summarised job by job just the same; -rate still
counts jobs (a request of N leaves every N/rate), -concurrency requests.
Exit code: 0 when every job got an answer (rejections included) and, with
-wait, every accepted job an outcome (failed ones included), 1 when some did
not, 2 for a usage error.

Examples:
  shaperctl publish -downstream printer -n 15 -rate 50/s -keys 3 -v
  shaperctl publish -downstream printer -n 100 -rate 2/s -concurrency 100 -wait
  shaperctl publish -downstream printer -n 10000 -rate 2000/s -bulk 100
`, stderr)
	var o publishOptions
	rate, payloadFile := definePublishFlags(fs, &o)
	defineBulkFlags(fs, &o.bulkOptions)
	notBefore := fs.String("not-before", "", "set Shaper-Not-Before: start no earlier than this RFC 3339 `time`, e.g. 2030-01-02T15:04:05Z")
	if code, ok := parseFlags(fs, args); !ok {
		return o, code, false
	}
	if msg := cmp.Or(checkPublish(o), checkWait(o), checkBulk(o)); msg != "" {
		return o, usageErr(stderr, "publish", "%s", msg), false
	}
	bad := func(format string, args ...any) (publishOptions, int, bool) {
		return o, usageErr(stderr, "publish", format, args...), false
	}
	if *rate != "" {
		r, err := config.ParseRate(*rate)
		if err != nil {
			return bad("-rate: %v", err)
		}
		o.Rate = r
	}
	if *notBefore != "" {
		t, err := time.Parse(time.RFC3339Nano, *notBefore)
		if err != nil {
			return bad("-not-before %q is not an RFC 3339 time; write e.g. 2030-01-02T15:04:05Z", *notBefore)
		}
		if o.Delay != 0 {
			return bad("-delay and -not-before exclude each other: one delay, or one instant")
		}
		o.NotBefore = t
	}
	if *payloadFile != "" {
		if isFlagSet(fs, "payload") {
			return bad("-payload and -payload-file exclude each other")
		}
		b, err := os.ReadFile(*payloadFile)
		if err != nil {
			return bad("-payload-file: %v", err)
		}
		o.Payload = string(b)
	}
	return o, 0, true
}

// definePublishFlags binds the flags of publish to o; it returns the two
// that need parsing after flag.Parse.
func definePublishFlags(fs *flag.FlagSet, o *publishOptions) (rate, payloadFile *string) {
	rate, payloadFile = new(string), new(string)
	fs.StringVar(&o.Downstream, "downstream", "", "downstream `name` (required): the last token of the subject")
	fs.IntVar(&o.N, "n", 1, "number of jobs to send")
	fs.StringVar(rate, "rate", "", "send `rate` in jobs, with -bulk too, such as 50/s, 120/m, 0.5/s (default: as fast as possible)")
	fs.IntVar(&o.Concurrency, "concurrency", 16, "requests in flight at once")
	fs.StringVar(&o.Key, "key", "", "admission `key` for every job (header -key-header)")
	fs.IntVar(&o.Keys, "keys", 0, "spread jobs over `K` admission keys key-0..key-(K-1), round robin")
	fs.StringVar(&o.KeyHeader, "key-header", producer.DefaultKeyHeader, "header carrying the admission key (ingress.key_header)")
	fs.StringVar(&o.Payload, "payload", defaultPayload, "job payload; {i} is replaced by the job index")
	fs.StringVar(payloadFile, "payload-file", "", "read the payload from `file` ({i} is replaced too)")
	fs.DurationVar(&o.MaxWait, "max-wait", 0, "set Shaper-Max-Wait: drop the job as expired if it cannot start within this (0 = not set)")
	fs.IntVar(&o.Priority, "priority", -1, "set Shaper-Priority: `level` 0 (most urgent)..queue.priorities−1 (-1 = not set: the least urgent)")
	fs.DurationVar(&o.Delay, "delay", 0, "set Shaper-Delay: start no earlier than this long after it is accepted (0 = not set)")
	fs.StringVar(&o.MsgIDPrefix, "msg-id-prefix", "", "set Nats-Msg-Id to `prefix` + index, for idempotency (repeat a run to see duplicates)")
	fs.StringVar(&o.NATSURL, "nats", "nats://127.0.0.1:4222", "NATS server `URL`")
	fs.StringVar(&o.SubjectPrefix, "subject-prefix", producer.DefaultSubjectPrefix, "ingress subject prefix (ingress.subject_prefix)")
	fs.DurationVar(&o.Timeout, "timeout", 5*time.Second, "how long to wait for each reply")
	fs.BoolVar(&o.NoReply, "no-reply", false, "plain publish: no reply subject, so no answers to count")
	fs.BoolVar(&o.Wait, "wait", false, "wait for each accepted job's outcome; summarise states and latency")
	fs.DurationVar(&o.WaitTimeout, "wait-timeout", 5*time.Minute, "with -wait: how long to wait for one job's outcome")
	fs.StringVar(&o.StatusPrefix, "status-prefix", producer.DefaultStatusPrefix, "with -wait: status look-up prefix (ingress.status_prefix)")
	fs.BoolVar(&o.JSON, "json", false, "print the summary as JSON")
	fs.BoolVar(&o.Verbose, "v", false, "also print one line per job")
	return rate, payloadFile
}

// checkPublish returns what is wrong with o's plain flags, or "".
func checkPublish(o publishOptions) string {
	switch {
	case o.Downstream == "":
		return "-downstream is required, e.g. -downstream printer"
	case !subjectToken.MatchString(o.Downstream):
		return fmt.Sprintf("-downstream %q: a downstream name has only letters, digits, - and _", o.Downstream)
	case o.N < 1:
		return fmt.Sprintf("-n must be at least 1, got %d", o.N)
	case o.Concurrency < 1:
		return fmt.Sprintf("-concurrency must be at least 1, got %d", o.Concurrency)
	case o.Key != "" && o.Keys > 0:
		return "-key and -keys exclude each other: one fixed key, or K keys spread round robin"
	case o.Keys < 0:
		return fmt.Sprintf("-keys must be 0 or more, got %d", o.Keys)
	case o.MaxWait < 0:
		return fmt.Sprintf("-max-wait must be positive (or 0 for not set), got %s", o.MaxWait)
	case o.Priority < -1 || o.Priority > 9:
		return fmt.Sprintf("-priority must be 0..9 (0 is the most urgent; the downstream's queue.priorities bounds it), or -1 for not set, got %d", o.Priority)
	case o.Delay < 0:
		return fmt.Sprintf("-delay must be positive (or 0 for not set), got %s", o.Delay)
	case o.KeyHeader == "" || strings.ContainsAny(o.KeyHeader, " \t:"):
		return fmt.Sprintf("-key-header %q is not a header name; e.g. Shaper-Key", o.KeyHeader)
	case o.Timeout <= 0:
		return fmt.Sprintf("-timeout must be positive, got %s", o.Timeout)
	case o.SubjectPrefix == "" || strings.ContainsAny(o.SubjectPrefix, " *>"):
		return fmt.Sprintf("-subject-prefix %q is not a subject prefix; e.g. shaper.jobs", o.SubjectPrefix)
	}
	return ""
}

// isFlagSet reports whether the flag name was given on the command line.
func isFlagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// jobResult is what happened to one job.
type jobResult struct {
	Index      int           `json:"index"`
	Key        string        `json:"key,omitempty"`
	Sent       bool          `json:"sent"`
	SentAt     time.Duration `json:"-"`                // since the first send was scheduled
	Status     string        `json:"status,omitempty"` // accepted, rejected; empty: no answer
	Reason     string        `json:"reason,omitempty"`
	RetryAfter int           `json:"retry_after_seconds,omitempty"` // 0: none given
	Position   int           `json:"position,omitempty"`
	ETA        *float64      `json:"eta_seconds,omitempty"` // nil: none (a duplicate, or paused)
	Paused     bool          `json:"paused,omitempty"`      // accepted while paused until resumed: no eta
	Duplicate  bool          `json:"duplicate,omitempty"`
	JobID      string        `json:"job_id,omitempty"`
	NotBefore  string        `json:"not_before,omitempty"` // a delayed job's instant, RFC 3339
	Err        string        `json:"error,omitempty"`      // no answer: timeout, no_responders, …; or the daemon's error text
	jobOutcome
}

// publishJobs sends o.N jobs, one a request or, with -bulk, o.Bulk a
// request, and returns one result per job (in index order) and the wall
// time.
func publishJobs(ctx context.Context, c *producer.Client, o publishOptions) ([]jobResult, time.Duration) {
	results := make([]jobResult, o.N)
	for i := range results {
		results[i] = jobResult{Index: i, Key: o.keyFor(i), Err: "not_sent"}
	}
	t0 := time.Now()
	if o.Bulk > 0 {
		sendPaced(ctx, o.Concurrency, (o.N+o.Bulk-1)/o.Bulk, o.Rate/float64(o.Bulk), t0, func(k int) {
			sendBulk(ctx, c, o, results[k*o.Bulk:min((k+1)*o.Bulk, o.N)], t0)
		})
	} else {
		sendPaced(ctx, o.Concurrency, o.N, o.Rate, t0, func(i int) { results[i] = sendJob(ctx, c, o, i, t0) })
	}
	return results, time.Since(t0)
}

// sendJob sends job i and waits for its reply (unless -no-reply).
func sendJob(ctx context.Context, c *producer.Client, o publishOptions, i int, t0 time.Time) jobResult {
	r := jobResult{Index: i, Key: o.keyFor(i), Sent: true, SentAt: time.Since(t0)}
	payload, opts := o.job(i)
	if o.NoReply {
		if err := c.Publish(o.Downstream, payload, opts...); err != nil {
			r.Err = errorKind(err)
		}
		return r
	}
	if o.Wait {
		waitJob(ctx, c, o, &r, payload, opts)
		return r
	}
	res, err := c.Submit(ctx, o.Downstream, payload, opts...)
	record(&r, res, err)
	return r
}

// record fills r from Submit's answer: accepted, rejected (with the
// daemon's error text), or the kind of failure when there was no answer.
func record(r *jobResult, res producer.Result, err error) {
	var rej *producer.RejectedError
	switch {
	case err == nil:
		r.Status, r.JobID, r.Duplicate = "accepted", res.JobID, res.Duplicate
		switch {
		case res.Duplicate: // a duplicate has no place in the queue
		case res.Paused: // no start is scheduled: no eta
			r.Position, r.Paused = res.Position, true
		default:
			r.Position, r.ETA = res.Position, new(res.ETA.Seconds())
		}
		if !res.NotBefore.IsZero() {
			r.NotBefore = res.NotBefore.UTC().Format(time.RFC3339Nano)
		}
	case errors.As(err, &rej):
		r.Status, r.Reason, r.Err = "rejected", cmp.Or(res.Reason, "unspecified"), res.ErrorText
		r.RetryAfter = int(res.RetryAfter / time.Second)
	default:
		r.Err = errorKind(err)
	}
}

// errorKind names a request failure for the summary.
func errorKind(err error) string {
	switch {
	case errors.Is(err, producer.ErrBadReply):
		return "bad_reply"
	case errors.Is(err, nats.ErrNoResponders):
		return "no_responders"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "interrupted"
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionDraining):
		return "connection_closed"
	}
	return "error: " + err.Error()
}
