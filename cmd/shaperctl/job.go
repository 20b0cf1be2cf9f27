package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/shaper/outcome"
	"github.com/shaperd/shaper/shaper/producer"
)

// jobOptions are the parsed flags and argument of job.
type jobOptions struct {
	Downstream   string
	JobID        string
	NATSURL      string
	StatusPrefix string
	Timeout      time.Duration
	JSON         bool
}

const jobAbout = `Asks shaperd what became of one job: a NATS request to
<status-prefix>.<downstream>.<ID>, which any instance answers from the job's
record (kept from acceptance until the downstream's outcomes.keep after it
ends). Prints its state, tries, instants and error, and the downstream's
answer to the last try: status, headers and body (as text when printable,
else base64). The ID is the job_id of the accept reply (shaperctl publish -v
prints it).
Exit code: 0 when the job is known, 1 when it is unknown (never seen, or it
ended more than outcomes.keep ago) or no shaperd answered, 2 for a usage
error.

Example:
  shaperctl job -downstream printer mXhY22bep2ILqbikPi2SY5
`

func cmdJob(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, code, ok := parseJobFlags(args, stderr)
	if !ok {
		return code
	}
	nc, err := nats.Connect(o.NATSURL, nats.Name("shaperctl job"), nats.Timeout(o.Timeout))
	if err != nil {
		fmt.Fprintf(stderr, "shaperctl job: cannot connect to NATS at %s: %v\nis shaperd running? is -nats right?\n", o.NATSURL, err)
		return exitFailed
	}
	defer nc.Close()
	rec, err := producer.Status(ctx, nc, o.Downstream, o.JobID, producer.StatusPrefix(o.StatusPrefix), producer.Timeout(o.Timeout))
	subject := o.StatusPrefix + "." + o.Downstream + "." + o.JobID
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		fmt.Fprintf(stderr, "shaperctl job: no shaperd answers status look-ups on %s: is shaperd running? is -nats right? "+
			"is -status-prefix the daemon's ingress.status_prefix?\n", subject)
		return exitFailed
	case err != nil:
		fmt.Fprintf(stderr, "shaperctl job: %v\n", err)
		return exitFailed
	case rec.State == outcome.Unknown:
		fmt.Fprintf(stderr, "shaperctl job: no record of job %s of downstream %s: it was never accepted there, "+
			"or it ended more than the downstream's outcomes.keep ago (keep 0: no records)\n", o.JobID, o.Downstream)
		return exitFailed
	}
	if o.JSON {
		b, _ := json.Marshal(rec)
		err = printJSON(stdout, b, nil)
	} else {
		err = renderJob(stdout, rec)
	}
	if err != nil {
		fmt.Fprintf(stderr, "shaperctl job: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// parseJobFlags parses job's flags and its one argument, the job id,
// which may come before the flags or after them.
func parseJobFlags(args []string, stderr io.Writer) (jobOptions, int, bool) {
	fs := newFlagSet("job", "-downstream NAME [flags] ID", jobAbout, stderr)
	var o jobOptions
	fs.StringVar(&o.Downstream, "downstream", "", "the downstream `name` (required)")
	fs.StringVar(&o.NATSURL, "nats", "nats://127.0.0.1:4222", "NATS server `URL`")
	fs.StringVar(&o.StatusPrefix, "status-prefix", producer.DefaultStatusPrefix, "status look-up subject prefix (ingress.status_prefix)")
	fs.DurationVar(&o.Timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	fs.BoolVar(&o.JSON, "json", false, "print the job's record as JSON")
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		o.JobID, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, exitOK, false
		}
		return o, exitUsage, false
	}
	rest := fs.Args()
	if o.JobID == "" && len(rest) > 0 {
		o.JobID, rest = rest[0], rest[1:]
	}
	var msg string
	switch {
	case len(rest) > 0:
		msg = fmt.Sprintf("unexpected argument %q: job takes one job id", rest[0])
	case o.Downstream == "":
		msg = "-downstream is required, e.g. -downstream printer"
	case !subjectToken.MatchString(o.Downstream):
		msg = fmt.Sprintf("-downstream %q: a downstream name has only letters, digits, - and _", o.Downstream)
	case o.JobID == "":
		msg = "say which job: its id, as the accept reply's job_id gives it"
	case strings.ContainsAny(o.JobID, ". \t*>"):
		msg = fmt.Sprintf("%q is not a job id: one subject token, without dots, spaces or wildcards", o.JobID)
	case o.Timeout <= 0:
		msg = fmt.Sprintf("-timeout must be positive, got %s", o.Timeout)
	case o.StatusPrefix == "" || strings.ContainsAny(o.StatusPrefix, " *>"):
		msg = fmt.Sprintf("-status-prefix %q is not a subject prefix; e.g. %s", o.StatusPrefix, producer.DefaultStatusPrefix)
	}
	if msg != "" {
		return o, usageErr(stderr, "job", "%s", msg), false
	}
	return o, 0, true
}

// renderJob prints a job's record: its fields, then the downstream's
// answer to the last try.
func renderJob(w io.Writer, rec outcome.Record) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	fmt.Fprintf(tw, "job id:\t%s\ndownstream:\t%s\nstate:\t%s\nattempts:\t%d\n", rec.JobID, rec.Downstream, rec.State, rec.Attempts)
	for _, f := range []struct {
		name string
		at   time.Time
	}{{"accepted", rec.AcceptedAt}, {"not before", rec.NotBefore}, {"started", rec.StartedAt}, {"ended", rec.EndedAt}} {
		if !f.at.IsZero() {
			fmt.Fprintf(tw, "%s:\t%s\n", f.name, f.at.UTC().Format(time.RFC3339Nano))
		}
	}
	if !rec.AcceptedAt.IsZero() && !rec.EndedAt.IsZero() {
		fmt.Fprintf(tw, "took:\t%s (accepted → ended)\n", formatSeconds(rec.EndedAt.Sub(rec.AcceptedAt)))
	}
	if rec.Error != "" {
		fmt.Fprintf(tw, "error:\t%s\n", oneLine(rec.Error, 1<<10))
	}
	if rec.BatchID != "" {
		fmt.Fprintf(tw, "batch:\t%s (the call that carried its last try)\n", rec.BatchID)
	}
	if rec.DeadLetterSeq > 0 {
		fmt.Fprintf(tw, "dead letter:\tseq %d (shaperctl dead show -downstream %s -seq %d)\n", rec.DeadLetterSeq, rec.Downstream, rec.DeadLetterSeq)
	}
	r := rec.Result
	if r == nil {
		fmt.Fprintf(tw, "answer:\tnone yet\n")
		return tw.Flush()
	}
	status := "NATS reply"
	if r.StatusCode != 0 {
		status = fmt.Sprintf("HTTP %d", r.StatusCode)
	}
	fmt.Fprintf(tw, "answer:\t%s, %d bytes\n", status, r.Bytes)
	for _, name := range slices.Sorted(maps.Keys(r.Headers)) {
		fmt.Fprintf(tw, "header:\t%s: %s\n", name, r.Headers[name])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeBody(w, r)
}

// writeBody prints the kept part of an answer's body, as text when it is
// printable, else base64.
func writeBody(w io.Writer, r *outcome.Result) error {
	if len(r.Body) == 0 {
		return nil
	}
	kept := fmt.Sprintf("%d bytes", len(r.Body))
	if r.Truncated {
		kept = fmt.Sprintf("the first %d of %d bytes", len(r.Body), r.Bytes)
	}
	var err error
	if printable(r.Body) {
		_, err = fmt.Fprintf(w, "body (%s):\n%s\n", kept, r.Body)
	} else {
		_, err = fmt.Fprintf(w, "body (%s, base64):\n%s\n", kept, base64.StdEncoding.EncodeToString(r.Body))
	}
	return err
}
