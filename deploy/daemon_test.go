package deploy_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/shaperd/shaper/cmd/shaperd/daemon"
	"github.com/shaperd/shaper/config"
)

// runConfig runs the daemon in-process on cfg until the test ends, logging
// at level to the test's output, and returns it once it is ready: it
// fails the test if the daemon stops first or is not ready within 20 s,
// and when the test ends it stops the daemon and waits for Run.
func runConfig(t *testing.T, cfg config.Config, level slog.Level) *daemon.Daemon {
	t.Helper()
	d, err := daemon.New(cfg, daemon.Options{Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))})
	if err != nil {
		t.Fatalf("daemon.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("daemon.Run: %v", err)
			}
		case <-time.After(2 * minStopTimeout(cfg.ShutdownGrace)):
			t.Error("daemon.Run did not return after cancel")
		}
	})
	select {
	case <-d.Ready():
	case err := <-done:
		done <- err // for the cleanup's wait
		t.Fatalf("daemon stopped before it was ready: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("daemon not ready within 20s")
	}
	return d
}
