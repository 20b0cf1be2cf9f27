package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/shaperd/shaper/cmd/shaperd/admin/api"
	"github.com/shaperd/shaper/config"
	"github.com/shaperd/shaper/shaper"
)

// MaxPause bounds a timed pause: {"for"} at most, {"until"} at most this far
// ahead.
const MaxPause = 366 * 24 * time.Hour

// The routes that change a downstream at runtime: a pause (timed or not),
// resume, an override of rate, concurrency and capacity, and its removal.
// Every body (package api declares them) is decoded strictly: an unknown field, a wrong type or a bad
// value is a 400 naming the field.

// user names who made a request, for the audit log: the basic-auth user,
// or anonymous and the client's address without basic auth.
func user(r *http.Request) string {
	if u, _, ok := r.BasicAuth(); ok && u != "" {
		return u
	}
	return "anonymous (" + r.RemoteAddr + ")"
}

// decodeStrict decodes body into v; the error names the field at fault.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var te *json.UnmarshalTypeError
	switch {
	case err == nil && dec.More():
		return errors.New("body: one JSON object expected, found more")
	case err == nil:
		return nil
	case errors.As(err, &te) && te.Field != "":
		return fmt.Errorf("%s: expected %s, got a JSON %s", te.Field, typeName(te.Type.String()), te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return fmt.Errorf("%s: unknown field", strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`))
	}
	return fmt.Errorf("body: not a JSON object: %v", err)
}

func typeName(t string) string {
	if strings.Contains(t, "int") {
		return "a whole number"
	}
	return "a string"
}

// pauseUntil reads a pause's body at now: the end of a timed pause, or
// zero for a pause until resumed (no body).
func pauseUntil(body []byte, now time.Time) (time.Time, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return time.Time{}, nil
	}
	var b api.PauseBody
	if err := decodeStrict(body, &b); err != nil {
		return time.Time{}, err
	}
	switch {
	case b.For != nil && b.Until != nil:
		return time.Time{}, errors.New("for, until: give one of the two, not both")
	case b.For != nil:
		d, err := time.ParseDuration(*b.For)
		if err != nil || d <= 0 || d > MaxPause {
			return time.Time{}, fmt.Errorf("for: %q is not a duration of 1s..%s; write e.g. 30m or 2h", *b.For, config.FormatDuration(MaxPause))
		}
		return now.Add(d), nil
	case b.Until != nil:
		t, err := time.Parse(time.RFC3339, *b.Until)
		if err != nil {
			return time.Time{}, fmt.Errorf("until: %q is not an RFC 3339 time; write YYYY-MM-DDThh:mm:ssZ", *b.Until)
		}
		if !t.After(now) || t.Sub(now) > MaxPause {
			return time.Time{}, fmt.Errorf("until: %s must be in the future, at most %s (366 days) ahead", *b.Until, config.FormatDuration(MaxPause))
		}
		return t, nil
	}
	return time.Time{}, nil // {}: as no body
}

// resumeBody checks a resume's body: none, or {}. A resume has no
// options, so a field (a pause's for or until, most likely) is refused
// rather than ignored.
func resumeBody(body []byte) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	var b struct{}
	if err := decodeStrict(body, &b); err != nil {
		return fmt.Errorf("resume takes no body (send none, or {}): %w", err)
	}
	return nil
}

// overridePatch reads PATCH /v1/downstreams/{name}'s body, validated as
// the config validates the same keys.
func overridePatch(body []byte) (shaper.Override, error) {
	var b api.OverrideBody
	if err := decodeStrict(body, &b); err != nil {
		return shaper.Override{}, err
	}
	var o shaper.Override
	var errs []error
	if b.Rate != nil {
		r, err := config.ParseRate(*b.Rate)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("rate: %w", err))
		case !(r >= config.MinRate) || math.IsInf(r, 0) || r > config.MaxRate:
			errs = append(errs, fmt.Errorf("rate: must be 1/h..1000000/s, got %s", *b.Rate))
		}
		o.Rate = r
	}
	if b.Concurrency != nil {
		if o.Concurrency = *b.Concurrency; o.Concurrency < 1 || o.Concurrency > config.MaxConcurrency {
			errs = append(errs, fmt.Errorf("concurrency: must be 1..%d, got %d", config.MaxConcurrency, o.Concurrency))
		}
	}
	if b.Capacity != nil {
		if o.Capacity = *b.Capacity; o.Capacity < 1 || o.Capacity > config.MaxCapacity {
			errs = append(errs, fmt.Errorf("capacity: must be 1..%d, got %d", config.MaxCapacity, o.Capacity))
		}
	}
	if b.MaxJobs != nil {
		if o.MaxJobs = *b.MaxJobs; o.MaxJobs < config.MinBatchJobs || o.MaxJobs > config.MaxBatchJobs {
			errs = append(errs, fmt.Errorf("max_jobs: must be %d..%d, got %d", config.MinBatchJobs, config.MaxBatchJobs, o.MaxJobs))
		}
	}
	if len(errs) == 0 && o.IsZero() {
		errs = append(errs, errors.New("body: give at least one of rate, concurrency, capacity, max_jobs"))
	}
	return o, errors.Join(errs...)
}

// downstreamsOrFail returns the running downstreams, or answers 503.
func (h *handlers) downstreamsOrFail(w http.ResponseWriter) Downstreams {
	ds := h.Downstreams()
	if ds == nil {
		writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: "starting"})
	}
	return ds
}

// writeChangeError answers a change that failed: 404 for an unknown
// downstream, 400 for values it cannot run with, 503 otherwise (the shared
// store could not take it).
func writeChangeError(w http.ResponseWriter, name string, err error) {
	status := http.StatusServiceUnavailable
	switch {
	case errors.Is(err, shaper.ErrUnknownDownstream):
		status = http.StatusNotFound
		err = fmt.Errorf("no downstream named %q; GET /v1/downstreams lists them", name)
	case errors.Is(err, shaper.ErrInvalidOverride):
		status = http.StatusBadRequest
	}
	writeJSON(w, status, api.Error{Error: err.Error()})
}

func (h *handlers) servePause(pause bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		ds := h.downstreamsOrFail(w)
		if ds == nil {
			return
		}
		body, _ := readBody(r)
		before, _ := laneOf(ds, name)
		reply := api.Change{Downstream: name, Status: "resumed"}
		var err error
		if pause {
			until, perr := pauseUntil(body, time.Now())
			if perr != nil {
				writeJSON(w, http.StatusBadRequest, api.Error{Error: perr.Error()})
				return
			}
			reply.Status = "paused"
			if !until.IsZero() {
				reply.PausedUntil = until.UTC().Format(time.RFC3339Nano)
			}
			err = ds.Pause(name, until, user(r))
		} else {
			if berr := resumeBody(body); berr != nil {
				writeJSON(w, http.StatusBadRequest, api.Error{Error: berr.Error()})
				return
			}
			err = ds.Resume(name, user(r))
		}
		if err != nil {
			writeChangeError(w, name, err)
			return
		}
		h.audit("downstream "+reply.Status+" through the admin API", ds, name, user(r), before)
		writeJSON(w, http.StatusOK, reply)
	}
}

func (h *handlers) serveOverride(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ds := h.downstreamsOrFail(w)
	if ds == nil {
		return
	}
	body, _ := readBody(r)
	o, err := overridePatch(body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, api.Error{Error: err.Error()})
		return
	}
	before, _ := laneOf(ds, name)
	if err := ds.SetOverride(name, o, user(r)); err != nil {
		writeChangeError(w, name, err)
		return
	}
	h.audit("downstream overridden through the admin API", ds, name, user(r), before)
	after, _ := laneOf(ds, name)
	writeJSON(w, http.StatusOK, api.Change{Downstream: name, Status: "overridden", Override: after.Override})
}

func (h *handlers) serveUnsetOverride(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ds := h.downstreamsOrFail(w)
	if ds == nil {
		return
	}
	before, _ := laneOf(ds, name)
	if err := ds.ClearOverride(name, user(r)); err != nil {
		writeChangeError(w, name, err)
		return
	}
	h.audit("downstream override removed through the admin API", ds, name, user(r), before)
	writeJSON(w, http.StatusOK, api.Change{Downstream: name, Status: "override removed"})
}

// readBody is the request's body, which limitBody has read already.
func readBody(r *http.Request) ([]byte, error) { return io.ReadAll(r.Body) }

// laneOf is downstream name's status now; ok is false for an unknown name.
func laneOf(ds Downstreams, name string) (shaper.LaneStatus, bool) {
	for _, st := range ds.Lanes() {
		if st.Name == name {
			return st, true
		}
	}
	return shaper.LaneStatus{}, false
}

// audit logs a change made through the admin API: what changed, from what
// to what, and who asked.
func (h *handlers) audit(msg string, ds Downstreams, name, by string, before shaper.LaneStatus) {
	after, _ := laneOf(ds, name)
	attrs := []any{"downstream", name, "by", by}
	if a, b := pauseText(before), pauseText(after); a != b {
		attrs = append(attrs, "paused", a+" → "+b)
	}
	if before.Rate != after.Rate {
		attrs = append(attrs, "rate", config.Rate(before.Rate).String()+" → "+config.Rate(after.Rate).String())
	}
	if before.Concurrency != after.Concurrency {
		attrs = append(attrs, "concurrency", fmt.Sprintf("%d → %d", before.Concurrency, after.Concurrency))
	}
	if before.Capacity != after.Capacity {
		attrs = append(attrs, "capacity", fmt.Sprintf("%d → %d", before.Capacity, after.Capacity))
	}
	if b, a := before.Batch, after.Batch; b != nil && a != nil && b.MaxJobs != a.MaxJobs {
		attrs = append(attrs, "max_jobs", fmt.Sprintf("%d → %d", b.MaxJobs, a.MaxJobs))
	}
	h.Logger.Info(msg, attrs...)
}

func pauseText(st shaper.LaneStatus) string {
	switch {
	case !st.Paused:
		return "no"
	case st.PausedUntil == nil:
		return "until resumed"
	}
	return "until " + st.PausedUntil.UTC().Format(time.RFC3339)
}
