package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/shaperd/shaper/cmd/shaperd/admin/api"
	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/outcome"
)

// Jobs is what the job routes read (a *shaper.Shaper): each job's record
// (docs/outcomes.md). Its methods are called from HTTP handlers
// concurrently, with the request's context.
type Jobs interface {
	// Job returns job id's record of downstream; ok is false for an id
	// with no record. An unknown downstream is an error wrapping
	// shaper.ErrUnknownDownstream, one that keeps no records one wrapping
	// shaper.ErrNoRecords.
	Job(ctx context.Context, downstream, id string) (rec outcome.Record, ok, shared bool, err error)
	// LatestJobs returns the last jobs of downstream this instance saw
	// end, newest first.
	LatestJobs(downstream string) []outcome.Record
}

// maxJobID bounds the {id} path value (a job id is 32 hex digits; a
// producer's own ids are bounded like Nats-Msg-Id).
const maxJobID = 256

// jobRoutes adds the job routes to mux.
func (h *handlers) jobRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/downstreams/{name}/jobs/{id}", h.serveJob)
	mux.HandleFunc("GET /v1/downstreams/{name}/jobs", h.serveLatestJobs)
}

// serveJob answers one job's record: 200 with it, 404 for an id with no
// record (never seen, or past outcomes.keep), an unknown downstream or
// one that keeps no records.
func (h *handlers) serveJob(w http.ResponseWriter, r *http.Request) {
	name, id := r.PathValue("name"), r.PathValue("id")
	if id == "" || len(id) > maxJobID {
		badRequest(w, fmt.Errorf("id: must be a job id of 1..%d bytes, as the accept reply gave it", maxJobID))
		return
	}
	jobs := h.jobs()
	if jobs == nil {
		writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: "starting"})
		return
	}
	rec, ok, _, err := jobs.Job(r.Context(), name, id)
	switch {
	case errors.Is(err, shaper.ErrUnknownDownstream):
		writeJSON(w, http.StatusNotFound, api.Error{
			Error: fmt.Sprintf("no downstream named %q; GET /v1/downstreams lists them", name)})
	case errors.Is(err, shaper.ErrNoRecords):
		writeJSON(w, http.StatusNotFound, api.Error{
			Error: fmt.Sprintf("downstream %q keeps no job records; set downstreams.%s.outcomes.keep", name, name)})
	case err != nil:
		writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: "job records could not be read: " + err.Error()})
	case !ok:
		writeJSON(w, http.StatusNotFound, outcome.Record{JobID: id, Downstream: name, State: outcome.Unknown})
	default:
		writeJSON(w, http.StatusOK, rec)
	}
}

// serveLatestJobs answers the last jobs of a downstream this instance
// saw end, newest first.
func (h *handlers) serveLatestJobs(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	jobs := h.jobs()
	if jobs == nil {
		writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: "starting"})
		return
	}
	// A look-up of an id no job has tells whether the downstream exists
	// and keeps records, without reading a store.
	switch _, _, _, err := jobs.Job(r.Context(), name, ""); {
	case errors.Is(err, shaper.ErrUnknownDownstream):
		writeJSON(w, http.StatusNotFound, api.Error{
			Error: fmt.Sprintf("no downstream named %q; GET /v1/downstreams lists them", name)})
		return
	case errors.Is(err, shaper.ErrNoRecords):
		writeJSON(w, http.StatusNotFound, api.Error{
			Error: fmt.Sprintf("downstream %q keeps no job records; set downstreams.%s.outcomes.keep", name, name)})
		return
	}
	latest := jobs.LatestJobs(name)
	if latest == nil {
		latest = []outcome.Record{}
	}
	writeJSON(w, http.StatusOK, struct {
		Jobs []outcome.Record `json:"jobs"`
	}{latest})
}

// jobs returns the job records' reader, nil while starting.
func (h *handlers) jobs() Jobs {
	if h.Jobs == nil {
		return nil
	}
	return h.Jobs()
}
