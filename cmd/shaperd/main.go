// Command shaperd is the shaper daemon: it takes jobs from NATS, holds them
// in a bounded queue per downstream and drains each at a constant rate.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/shaperd/shaper/cmd/shaperd/daemon"
	"github.com/shaperd/shaper/config"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitConfig = 2
)

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("shaperd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "config `file` (YAML); every key can be overridden by env SHAPER_<KEY_PATH>. Empty: defaults, embedded NATS, no downstreams")
	check := fs.Bool("check-config", false, "validate the config (file and env) and exit: 0 valid, 2 invalid")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: shaperd [-config FILE] [-check-config] [-log-format text|json]\n\n")
		fmt.Fprintf(stderr, "Takes jobs from NATS subjects <ingress.subject_prefix>.<downstream> and drains each\n")
		fmt.Fprintf(stderr, "downstream's bounded queue at a constant rate. Signals: SIGHUP reloads the config,\n")
		fmt.Fprintf(stderr, "SIGTERM/SIGINT shut down gracefully (a second one exits at once).\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitConfig
	}
	log, err := newLogger(*logFormat, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "shaperd:", err)
		return exitConfig
	}
	load := func() (config.Config, error) { return config.Load(*path) }
	cfg, err := load()
	if err != nil {
		fmt.Fprintf(stderr, "shaperd: invalid config:\n%v\n", err)
		return exitConfig
	}
	if *check {
		fmt.Fprintf(stderr, "shaperd: config OK (%d downstreams)\n", len(cfg.Downstreams))
		return exitOK
	}
	d, err := daemon.New(cfg, daemon.Options{Logger: log, NoConfigFile: *path == ""})
	if err != nil {
		fmt.Fprintf(stderr, "shaperd: %v\n", err)
		return exitConfig
	}
	return serve(d, load, log)
}

// serve runs the daemon until SIGTERM or SIGINT; SIGHUP reloads. A second
// SIGTERM/SIGINT while shutting down exits at once.
func serve(d *daemon.Daemon, load func() (config.Config, error), log *slog.Logger) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)

	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	stopping := false
	for {
		select {
		case err := <-done:
			if err != nil {
				log.Error("shaperd stopped with an error", "err", err)
				return exitFailed
			}
			log.Info("shaperd stopped")
			return exitOK
		case sig := <-sigs:
			switch {
			case sig == syscall.SIGHUP && !stopping:
				log.Info("SIGHUP: reloading config")
				_ = d.Reload(load) // Reload logs and counts its own refusal
			case sig == syscall.SIGHUP:
			case stopping:
				log.Warn("second signal: exiting at once; queued jobs are not dead-lettered", "signal", sig.String())
				return exitFailed
			default:
				log.Info("signal received: shutting down", "signal", sig.String())
				stopping = true
				cancel()
			}
		}
	}
}

func newLogger(format string, w io.Writer) (*slog.Logger, error) {
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	}
	return nil, fmt.Errorf("-log-format %q: write text or json", format)
}
