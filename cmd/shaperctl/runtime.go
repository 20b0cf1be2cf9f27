package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/shaperd/shaper/cmd/shaperd/admin/api"
)

// The runtime commands: pause (until resumed, for a duration or until a
// time), resume, set (override rate, concurrency, capacity, batch
// max_jobs) and unset. On
// a jetstream downstream the daemon keeps the change for every instance.

const runtimeAbout = `Changes a downstream at runtime through the admin API. On a jetstream
downstream the change holds for every instance and survives restarts; on a
memory downstream it belongs to the instance asked.

  shaperctl pause -downstream printer               # until resume
  shaperctl pause -downstream printer -for 30m      # ends by itself; at most 8784h
  shaperctl pause -downstream printer -until YYYY-MM-DDThh:mm:ssZ  # at most 366 days ahead
  shaperctl resume -downstream printer
  shaperctl set -downstream printer -rate 5/s -concurrency 2 -capacity 50
  shaperctl set -downstream erp -max-jobs 200       # a downstream with a batch: jobs per call
  shaperctl unset -downstream printer               # back to the config file's values
` + adminAuthHelp

type runtimeOptions struct {
	adminFlags
	Downstream            string
	For, Until, Rate      string
	Concurrency, Capacity int
	MaxJobs               int
	given                 map[string]bool // the flags given, whatever their value
}

func cmdPause(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runRuntime(ctx, "pause", args, stdout, stderr)
}

func cmdResume(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runRuntime(ctx, "resume", args, stdout, stderr)
}

func cmdSet(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runRuntime(ctx, "set", args, stdout, stderr)
}

func cmdUnset(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runRuntime(ctx, "unset", args, stdout, stderr)
}

// runRuntime parses name's flags, makes its request and prints the answer.
func runRuntime(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	synopsis := map[string]string{
		"pause": "-downstream NAME [-for D | -until T]", "resume": "-downstream NAME",
		"set": "-downstream NAME [-rate R] [-concurrency C] [-capacity K] [-max-jobs J]", "unset": "-downstream NAME",
	}[name]
	fs := newFlagSet(name, synopsis, runtimeAbout, stderr)
	var o runtimeOptions
	o.register(fs)
	fs.StringVar(&o.Downstream, "downstream", "", "the downstream `name` (required)")
	switch name {
	case "pause":
		fs.StringVar(&o.For, "for", "", "pause for this `duration` (e.g. 30m; at most 8784h, 366 days), then resume by itself")
		fs.StringVar(&o.Until, "until", "", "pause until this RFC 3339 `time` (YYYY-MM-DDThh:mm:ssZ, in the future and at most 366 days ahead), then resume by itself")
	case "set":
		fs.StringVar(&o.Rate, "rate", "", "override the drain `rate` (e.g. 5/s or 120/m)")
		fs.IntVar(&o.Concurrency, "concurrency", 0, "override the deliveries in flight (`N`)")
		fs.IntVar(&o.Capacity, "capacity", 0, "override the queue capacity (`N`)")
		fs.IntVar(&o.MaxJobs, "max-jobs", 0, "override batch.max_jobs, the jobs in one call of a downstream with a batch (`N`)")
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	o.given = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.given[f.Name] = true })
	method, path, body, msg := o.request(name)
	if msg != "" {
		return usageErr(stderr, name, "%s", msg)
	}
	c, err := o.client(10 * time.Second)
	if err != nil {
		return usageErr(stderr, name, "%v", err)
	}
	answer, err := c.do(ctx, method, path, body)
	if err != nil {
		fmt.Fprintf(stderr, "shaperctl %s: %v\n", name, err)
		return exitFailed
	}
	var doc api.Change
	_ = json.Unmarshal(answer, &doc)
	line := fmt.Sprintf("%s: %s", o.Downstream, doc.Status)
	if doc.PausedUntil != "" {
		line += " until " + doc.PausedUntil
	}
	if ov, ok := doc.Override.(map[string]any); ok {
		b, _ := json.Marshal(ov)
		line += " " + string(b)
	}
	fmt.Fprintln(stdout, line)
	return exitOK
}

// request is name's admin request, or what is wrong with the flags.
func (o runtimeOptions) request(name string) (method, path string, body []byte, problem string) {
	if o.Downstream == "" {
		return "", "", nil, "-downstream NAME is required"
	}
	base := "/v1/downstreams/" + url.PathEscape(o.Downstream)
	switch name {
	case "pause":
		var req api.PauseBody
		switch {
		case o.For != "" && o.Until != "":
			return "", "", nil, "give -for or -until, not both"
		case o.For != "":
			req.For = &o.For
		case o.Until != "":
			req.Until = &o.Until
		}
		body, _ = json.Marshal(req)
		return http.MethodPost, base + "/pause", body, ""
	case "resume":
		return http.MethodPost, base + "/resume", nil, ""
	case "unset":
		return http.MethodDelete, base + "/override", nil, ""
	}
	// A flag given is sent whatever its value (-concurrency 0 too): the
	// daemon validates it and names what would be valid.
	var req api.OverrideBody
	if o.given["rate"] {
		rate := strings.TrimSpace(o.Rate)
		req.Rate = &rate
	}
	if o.given["concurrency"] {
		req.Concurrency = &o.Concurrency
	}
	if o.given["capacity"] {
		req.Capacity = &o.Capacity
	}
	if o.given["max-jobs"] {
		req.MaxJobs = &o.MaxJobs
	}
	if req == (api.OverrideBody{}) {
		return "", "", nil, "give at least one of -rate, -concurrency, -capacity, -max-jobs"
	}
	body, _ = json.Marshal(req)
	return http.MethodPatch, base, body, ""
}
