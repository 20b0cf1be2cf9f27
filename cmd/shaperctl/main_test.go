package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// unreachableAdmin is an admin URL where nothing listens: port 1 (tcpmux)
// is privileged and served by nothing on a developer's or a CI machine, so
// a dial is refused at once. The port of a closed test server would not
// do: on a busy machine another process can take it, and a dial into a
// listener that answers no SYN (its backlog full) hangs until the client's
// timeout, then goes on in the transport past the test's end.
const unreachableAdmin = "http://127.0.0.1:1"

// runCmd runs shaperctl with args and returns the exit code and outputs.
func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runCtx(t.Context(), args...)
}

func runCtx(ctx context.Context, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestRunUsage(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string // in stdout or stderr
	}{
		{"no args", nil, exitUsage, "Commands:"},
		{"help", []string{"-h"}, exitOK, "publish"},
		{"unknown", []string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{"publish help", []string{"publish", "-h"}, exitOK, "Examples:\n  shaperctl publish -downstream printer"},
		{"status help", []string{"status", "-h"}, exitOK, "shaperctl status -admin"},
		{"simulate help", []string{"simulate", "-h"}, exitOK, "-pattern boundary"},
		{"sink help", []string{"sink", "-h"}, exitOK, "-fail-every 5"},
		{"bad flag", []string{"status", "-nope"}, exitUsage, "flag provided but not defined"},
		{"stray arg", []string{"status", "extra"}, exitUsage, `unexpected argument "extra"`},
		{"publish no downstream", []string{"publish"}, exitUsage, "-downstream is required"},
		{"publish bad name", []string{"publish", "-downstream", "a.b"}, exitUsage, "only letters, digits"},
		{"publish bad rate", []string{"publish", "-downstream", "p", "-rate", "fast"}, exitUsage, `"fast" is not a rate; write e.g. 2/s`},
		{"publish rate unit", []string{"publish", "-downstream", "p", "-rate", "5"}, exitUsage, "it needs a unit; write e.g. 5/s"},
		{"publish key and keys", []string{"publish", "-downstream", "p", "-key", "a", "-keys", "2"}, exitUsage, "exclude each other"},
		{"publish n", []string{"publish", "-downstream", "p", "-n", "0"}, exitUsage, "-n must be at least 1"},
		{"publish key header", []string{"publish", "-downstream", "p", "-key-header", ""}, exitUsage, `-key-header "" is not a header name`},
		{"publish payload both", []string{"publish", "-downstream", "p", "-payload", "x", "-payload-file", "main.go"}, exitUsage, "exclude each other"},
		{"publish payload missing", []string{"publish", "-downstream", "p", "-payload-file", "/nonexistent"}, exitUsage, "-payload-file"},
		{"simulate pattern", []string{"simulate", "-pattern", "spiky"}, exitUsage, `unknown -pattern "spiky"`},
		{"simulate csv needs file", []string{"simulate", "-pattern", "csv"}, exitUsage, "needs -csv FILE"},
		{"simulate limit", []string{"simulate", "-limit", "0"}, exitUsage, "-limit must be"},
		{"status watch", []string{"status", "-watch", "-1s"}, exitUsage, "-watch must be positive"},
		{"sink status", []string{"sink", "-status", "42"}, exitUsage, "-status must be an HTTP status"},
		{"sink fail-every", []string{"sink", "-fail-every", "-1"}, exitUsage, "-fail-every must be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, stdout, stderr)
			}
			if !strings.Contains(stdout+stderr, tt.wantOut) {
				t.Errorf("output lacks %q\nstdout: %s\nstderr: %s", tt.wantOut, stdout, stderr)
			}
		})
	}
}

func TestFormatRate(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{2, "2/s"},
		{0.5, "30/m"},
		{100.0 / 60, "1.667/s"},
		{1.0 / 3600, "1/h"},
		{49.8765, "49.877/s"},
	}
	for _, tt := range tests {
		if got := formatRate(tt.in); got != tt.want {
			t.Errorf("formatRate(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
