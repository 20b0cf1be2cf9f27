// Command shaperctl is the operator and producer tool for shaperd: it
// publishes test jobs (and waits for their outcomes), shows what became of
// a job and a downstream's job events, shows the downstream table, lists
// and replays dead letters, probes /healthz (the container's HEALTHCHECK), compares
// admission algorithms on a traffic pattern and runs a demo HTTP
// downstream. The commands that call the admin API take -user/-password
// (admin.basic_auth) and -ca with an https:// URL (admin.tls).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // the command ran and something did not work (no answer, unreachable)
	exitUsage  = 2 // bad flags or arguments
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"publish", "send N jobs to a downstream and summarise the replies (-wait: and the outcomes)", cmdPublish},
		{"job", "show what became of one job: its state, tries, error and the downstream's answer", cmdJob},
		{"watch", "print a downstream's job events live (-since: the stored ones first)", cmdWatch},
		{"status", "show every downstream's rate, queue depth and counters from the admin API", cmdStatus},
		{"dead", "list, show, replay or purge a downstream's stored dead letters", cmdDead},
		{"pause", "pause a downstream's starts, until resumed or for a while (-for, -until)", cmdPause},
		{"resume", "resume a paused downstream", cmdResume},
		{"set", "override a downstream's rate, concurrency or capacity at runtime", cmdSet},
		{"unset", "return a downstream to its config file's values", cmdUnset},
		{"health", "exit 0 if the daemon answers /healthz (the container's HEALTHCHECK)", cmdHealth},
		{"simulate", "replay a traffic pattern through every admission algorithm and compare", cmdSimulate},
		{"sink", "run a demo HTTP downstream that prints every job it receives", cmdSink},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches args to a subcommand and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printUsage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		printUsage(stdout)
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "shaperctl: unknown command %q\n\n", args[0])
	printUsage(stderr)
	return exitUsage
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, "Usage: shaperctl <command> [flags]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Examples:
  shaperctl sink -listen 127.0.0.1:8080
  shaperctl publish -downstream printer -n 15
  shaperctl publish -downstream printer -n 15 -wait
  shaperctl job -downstream printer mXhY22bep2ILqbikPi2SY5
  shaperctl watch -downstream printer -since 10m
  shaperctl status -watch 2s
  SHAPER_ADMIN_USER=ops SHAPER_ADMIN_PASSWORD=... shaperctl status -admin https://host:9090 -ca ca.pem
  shaperctl dead list -downstream printer
  shaperctl pause -downstream printer -for 30m
  shaperctl set -downstream printer -rate 5/s
  shaperctl simulate -pattern boundary -svg boundary.svg

Run 'shaperctl <command> -h' for the flags of a command.
`)
}

// newFlagSet returns a flag set whose -h prints usage (what the command
// does and an example) followed by the flags.
func newFlagSet(name, synopsis, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("shaperctl "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: shaperctl %s %s\n\n%s\nFlags:\n", name, synopsis, about)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args and reports the exit code to return if parsing
// ended the command: -h gives 0, a bad flag or a stray argument gives 2.
func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q (flags go before arguments; see -h)\n", fs.Name(), fs.Arg(0))
		return exitUsage, false
	}
	return 0, true
}

// usageErr prints a usage problem and returns exitUsage.
func usageErr(stderr io.Writer, cmd, format string, args ...any) int {
	fmt.Fprintf(stderr, "shaperctl %s: %s (see 'shaperctl %s -h')\n", cmd, fmt.Sprintf(format, args...), cmd)
	return exitUsage
}
