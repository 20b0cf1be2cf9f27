// Package daemon runs shaperd in-process: it connects to NATS (or starts an
// embedded server), turns intake messages into shaper jobs, delivers to NATS
// sinks and dead-letter subjects, and serves the admin HTTP API.
//
// It exists beside cmd/shaperd so that tests and other binaries can embed the
// whole daemon, as Alertmanager's app package does.
package daemon
