// Package api declares the bodies of shaperd's admin HTTP API: what the
// /healthz, /readyz and /v1/... endpoints answer and the JSON bodies they
// take. The admin server (cmd/shaperd/admin) encodes these types and
// shaperctl decodes them, so each shape is written down once; docs/ and
// the README describe the same fields to users.
//
// It holds data only and imports nothing but the standard library, so the
// CLI links none of the daemon. A field's JSON name, its omitempty and the
// order of the fields are the wire format: some structs list their fields
// in an order that keeps the bytes the API has always sent (the order of a
// map's sorted keys, where the server used to build a map).
package api

// Error is the body of every refusal (4xx, 5xx): what is wrong, naming the
// field or flag at fault where there is one.
type Error struct {
	Error string `json:"error"`
}

// Health is the body of GET /healthz ({"status":"ok"}) and GET /readyz:
// {"status":"ready"}, or with 503 {"problems":[...],"status":"unready"},
// the problems saying what keeps the daemon from being ready.
type Health struct {
	Problems []string `json:"problems,omitempty"`
	Status   string   `json:"status"`
}

// Downstreams is the body of GET /v1/downstreams: one row per downstream,
// sorted by name. A row is the shaper's lane status (name, rate,
// effective_rate, depth, capacity, inflight, paused, the counters, ...)
// with the downstream's "dead_letters" (a DeadLetterSummary) when the
// daemon keeps a store for it. Row is the reader's choice, so that this
// package needs no shaper type: the server fills it with its rows,
// shaperctl reads map[string]any and so shows every counter, new ones too.
type Downstreams[Row any] struct {
	Downstreams []Row `json:"downstreams"`
}
