package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/shaperd/shaper/cmd/shaperd/admin/api"
	"github.com/shaperd/shaper/config"
)

// deadOptions are the parsed flags of dead.
type deadOptions struct {
	adminFlags
	Downstream string
	Seq        uint64
	Rate       string
	Limit      int
	Reason     string
	JSON       bool
}

// deadActions are dead's subcommands and the flags each takes.
var deadActions = map[string][]string{
	"list":   {"limit", "reason"},
	"show":   {"seq"},
	"replay": {"rate", "limit", "reason"},
	"purge":  {},
}

const deadAbout = `Lists, shows, replays or purges the dead letters a running shaperd keeps
for a downstream, through its admin API (/v1/downstreams/NAME/dead):

  list     the stored dead letters, oldest first (-limit, default 100; -reason)
  show     one dead letter with its payload and headers (-seq N)
  replay   put them back into the downstream's queue at a pace below live
           traffic (-rate, default the downstream's rate / 10; -limit; -reason)
  purge    delete every stored dead letter of the downstream

Examples:
  shaperctl dead list -downstream printer -reason failed
  shaperctl dead show -downstream printer -seq 12
  shaperctl dead replay -downstream printer -rate 2/s -limit 100
  shaperctl dead purge -downstream printer
` + adminAuthHelp

func cmdDead(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	action := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		action, args = args[0], args[1:]
	}
	fs := newFlagSet("dead", "list|show|replay|purge -downstream NAME [flags]", deadAbout, stderr)
	var o deadOptions
	o.register(fs)
	fs.StringVar(&o.Downstream, "downstream", "", "the downstream `name` (required)")
	fs.Uint64Var(&o.Seq, "seq", 0, "show: the dead letter's `seq`, as list prints it")
	fs.StringVar(&o.Rate, "rate", "", "replay: at most this `rate`, e.g. 2/s or 120/m (default the downstream's rate / 10)")
	fs.IntVar(&o.Limit, "limit", 0, "list: show at most `N` (default 100); replay: replay at most N (default all)")
	fs.StringVar(&o.Reason, "reason", "", "list, replay: only dead letters with this `reason` (failed, expired, shutdown, ...)")
	fs.BoolVar(&o.JSON, "json", false, "print the daemon's JSON as is")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if msg := checkDead(action, o, fs); msg != "" {
		return usageErr(stderr, "dead", "%s", msg)
	}
	c, err := o.client(10 * time.Second)
	if err != nil {
		return usageErr(stderr, "dead", "%v", err)
	}
	err = map[string]func(context.Context, *adminClient, deadOptions, io.Writer) error{
		"list": deadList, "show": deadShow, "replay": deadReplay, "purge": deadPurge,
	}[action](ctx, c, o, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "shaperctl dead %s: %v\n", action, err)
		return exitFailed
	}
	return exitOK
}

// checkDead returns what is wrong with the action and its flags, or "".
func checkDead(action string, o deadOptions, fs *flag.FlagSet) string {
	allowed, ok := deadActions[action]
	switch {
	case action == "":
		return "say what to do: list, show, replay or purge"
	case !ok:
		return fmt.Sprintf("unknown action %q; use list, show, replay or purge", action)
	case o.Downstream == "":
		return "-downstream is required, e.g. -downstream printer"
	case !subjectToken.MatchString(o.Downstream):
		return fmt.Sprintf("-downstream %q: a downstream name has only letters, digits, - and _", o.Downstream)
	case action == "show" && o.Seq == 0:
		return "show needs -seq N (a seq from 'shaperctl dead list')"
	case o.Limit < 0 || o.Limit == 0 && given(fs, "limit"):
		// -limit 0 is refused, not taken for "no limit": a replay of
		// every dead letter is what leaving -limit out asks for.
		return fmt.Sprintf("-limit must be at least 1, got %d", o.Limit)
	}
	if o.Rate != "" {
		if _, err := config.ParseRate(o.Rate); err != nil {
			return "-rate " + err.Error()
		}
	}
	var stray []string
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "downstream" && f.Name != "json" && !slices.Contains(adminFlagNames, f.Name) && !slices.Contains(allowed, f.Name) {
			stray = append(stray, "-"+f.Name)
		}
	})
	if len(stray) > 0 {
		return fmt.Sprintf("%s does not take %s", action, strings.Join(stray, ", "))
	}
	return ""
}

func deadPath(o deadOptions, tail string) string {
	return "/v1/downstreams/" + neturl.PathEscape(o.Downstream) + "/dead" + tail
}

func deadList(ctx context.Context, c *adminClient, o deadOptions, w io.Writer) error {
	q := neturl.Values{}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Reason != "" {
		q.Set("reason", o.Reason)
	}
	path := deadPath(o, "")
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	body, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil || o.JSON {
		return printJSON(w, body, err)
	}
	var doc api.DeadLetterList
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("%s did not answer the expected JSON: %w", path, err)
	}
	return renderDeadList(w, o, doc.DeadLetters, doc.Total)
}

// renderDeadList prints the dead-letter table and a count line.
func renderDeadList(w io.Writer, o deadOptions, list []api.DeadLetter, total int) error {
	what := "dead letters"
	if o.Reason != "" {
		what = o.Reason + " " + what
	}
	if total == 0 {
		_, err := fmt.Fprintf(w, "no %s stored for %s\n", what, o.Downstream)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tREASON\tATTEMPTS\tBYTES\tJOB ID\tERROR")
	for _, d := range list {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s\t%s\n", d.Seq, d.Time.UTC().Format(time.RFC3339),
			d.Reason, d.Attempts, d.PayloadBytes, d.JobID, oneLine(d.Error, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d of %d %s of %s, oldest first\n", len(list), total, what, o.Downstream)
	return err
}

func deadShow(ctx context.Context, c *adminClient, o deadOptions, w io.Writer) error {
	path := deadPath(o, "/"+strconv.FormatUint(o.Seq, 10))
	body, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil || o.JSON {
		return printJSON(w, body, err)
	}
	var d api.DeadLetterDetail
	if err := json.Unmarshal(body, &d); err != nil {
		return fmt.Errorf("%s did not answer the expected JSON: %w", path, err)
	}
	return renderDeadShow(w, d)
}

// renderDeadShow prints one dead letter: its fields, the producer's
// headers, and the payload as text when it is printable, else base64.
func renderDeadShow(w io.Writer, d api.DeadLetterDetail) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	fmt.Fprintf(tw, "seq:\t%d\njob id:\t%s\nreason:\t%s\nerror:\t%s\nattempts:\t%d\ntime:\t%s\n",
		d.Seq, d.JobID, d.Reason, oneLine(d.Error, 1<<10), d.Attempts, d.Time.UTC().Format(time.RFC3339Nano))
	names := make([]string, 0, len(d.Headers))
	for name := range d.Headers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for _, v := range d.Headers[name] {
			fmt.Fprintf(tw, "header:\t%s: %s\n", name, v)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var err error
	if printable(d.Payload) {
		_, err = fmt.Fprintf(w, "payload (%d bytes):\n%s\n", len(d.Payload), d.Payload)
	} else {
		_, err = fmt.Fprintf(w, "payload (%d bytes, base64):\n%s\n", len(d.Payload), base64.StdEncoding.EncodeToString(d.Payload))
	}
	return err
}

func deadReplay(ctx context.Context, c *adminClient, o deadOptions, w io.Writer) error {
	var req api.ReplayBody
	if o.Rate != "" {
		req.Rate = &o.Rate
	}
	if o.Limit > 0 {
		req.Limit = &o.Limit
	}
	if o.Reason != "" {
		req.Reason = &o.Reason
	}
	b, _ := json.Marshal(req)
	body, err := c.do(ctx, http.MethodPost, deadPath(o, "/replay"), b)
	if err != nil || o.JSON {
		return printJSON(w, body, err)
	}
	var doc api.ReplayStarted
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("replay did not answer the expected JSON: %w", err)
	}
	rate := "the downstream's rate / 10"
	if o.Rate != "" {
		rate = o.Rate
	}
	what := "dead letters"
	if o.Reason != "" {
		what = o.Reason + " " + what
	}
	_, err = fmt.Fprintf(w, "replaying %d %s of %s, oldest first, at most %s, after any live jobs\n",
		doc.Replaying, what, o.Downstream, rate)
	return err
}

func deadPurge(ctx context.Context, c *adminClient, o deadOptions, w io.Writer) error {
	if _, err := c.do(ctx, http.MethodDelete, deadPath(o, ""), nil); err != nil {
		return err
	}
	if o.JSON {
		return printJSON(w, fmt.Appendf(nil, `{"downstream":%q,"purged":true}`, o.Downstream), nil)
	}
	_, err := fmt.Fprintf(w, "purged every dead letter of %s\n", o.Downstream)
	return err
}

// printJSON prints body indented, or returns err.
func printJSON(w io.Writer, body []byte, err error) error {
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if json.Indent(&buf, body, "", "  ") == nil {
		body = buf.Bytes()
	}
	_, err = fmt.Fprintf(w, "%s\n", bytes.TrimRight(body, "\n"))
	return err
}

// oneLine cuts s to n bytes on one line, for a table cell.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// printable reports whether b is UTF-8 text without control characters
// other than newlines and tabs.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if unicode.IsControl(r) && r != '\n' && r != '\t' && r != '\r' {
			return false
		}
	}
	return true
}

// given reports whether the flag name was set on the command line.
func given(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
