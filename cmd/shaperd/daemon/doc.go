// Package daemon runs shaperd in-process: it connects to NATS (or starts an
// embedded server), turns intake messages into shaper jobs (claiming each
// Nats-Msg-Id for dedupe) and answers producers, builds the durable queues,
// the dead-letter stores (every dead letter, a rejected plain publish's
// too, is stored through them, or published when NATS has no JetStream),
// the shared admission store and the sinks, reloads the config, and wires
// the pieces together. The admin HTTP API and status page are package admin's;
// the daemon starts its server and tells it the shaper, the registry and
// what is not ready yet.
//
// It exists beside cmd/shaperd so that tests and other binaries can embed the
// whole daemon, as Alertmanager's app package does.
package daemon
