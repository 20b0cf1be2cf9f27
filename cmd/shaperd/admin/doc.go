// Package admin provides shaperd's admin HTTP server: GET /metrics,
// /healthz and /readyz, the /v1 API (GET /v1/downstreams, POST
// /v1/downstreams/{name}/pause and /resume, GET /v1/history, the
// dead-letter routes under /v1/downstreams/{name}/dead) and the status
// page at GET /, optionally over TLS and behind basic auth. The JSON
// bodies it answers and takes are declared in package api, which
// shaperctl decodes them with.
//
// It reads the daemon through small interfaces it defines (Downstreams,
// DeadLetters, DeadStats, a readiness function, a Prometheus Registry), so
// it never imports cmd/shaperd/daemon; the daemon starts a Server and owns
// the History sampler the status page draws from. screenshot.sh takes a headless
// Chromium screenshot of a running daemon's status page.
package admin
