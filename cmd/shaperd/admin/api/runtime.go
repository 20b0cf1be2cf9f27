package api

// The bodies of the runtime changes: POST /v1/downstreams/{name}/pause
// and /resume, PATCH /v1/downstreams/{name} and DELETE
// /v1/downstreams/{name}/override. A request's fields are pointers so that
// the server tells a field left out from a zero; a nil one is not sent.

// PauseBody is POST /v1/downstreams/{name}/pause's optional body: a timed
// pause, for a duration ("30m") or until an RFC 3339 time; one of the two
// at most. No body, or {}, pauses until resumed.
type PauseBody struct {
	For   *string `json:"for,omitempty"`
	Until *string `json:"until,omitempty"`
}

// OverrideBody is PATCH /v1/downstreams/{name}'s body: at least one of the
// fields, each over the configured value ("5/s" or "120/m" for the rate).
// The fields are in the order shaperctl has always sent them.
type OverrideBody struct {
	Capacity    *int    `json:"capacity,omitempty"`
	Concurrency *int    `json:"concurrency,omitempty"`
	Rate        *string `json:"rate,omitempty"`
	MaxJobs     *int    `json:"max_jobs,omitempty"` // batch.max_jobs, of a downstream with a batch
}

// Change answers a runtime change that was made: the downstream, and
// Status "paused", "resumed", "overridden" or "override removed".
type Change struct {
	Downstream string `json:"downstream"`
	// Override is what is overridden after a PATCH, the same object as
	// the downstream's "override" in GET /v1/downstreams (rate per second,
	// concurrency, capacity; the shaper declares it). It is left untyped
	// so that this package needs no shaper type; a reader gets a
	// map[string]any. Absent from every other change.
	Override any `json:"override,omitempty"`
	// PausedUntil is when a timed pause ends, RFC 3339 in UTC; absent for
	// a pause until resumed and from every other change.
	PausedUntil string `json:"paused_until,omitempty"`
	Status      string `json:"status"`
}
