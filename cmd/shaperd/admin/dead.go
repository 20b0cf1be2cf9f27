package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/shaperd/shaper/cmd/shaperd/admin/api"
	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/deadletter"
)

// DeadLetters is what the dead-letter routes read and control (docs/dead-letters.md): the daemon's dead-letter store and its paced
// replayers. Its methods are called from HTTP handlers concurrently, with
// the request's context. An unknown downstream is an error wrapping
// shaper.ErrUnknownDownstream and an unknown seq one wrapping
// deadletter.ErrNotFound (both answered 404); any other error is answered 503
// with its text (the store is unreachable, or NATS has no JetStream).
type DeadLetters interface {
	// List returns downstream's dead letters matching q, oldest first, at
	// most q.Limit of them, and how many match in all.
	List(ctx context.Context, downstream string, q DeadQuery) ([]DeadLetter, int, error)
	// Get returns one dead letter with its payload and producer headers.
	Get(ctx context.Context, downstream string, seq uint64) (DeadLetterDetail, error)
	// Delete removes one dead letter.
	Delete(ctx context.Context, downstream string, seq uint64) error
	// Purge removes every dead letter of downstream.
	Purge(ctx context.Context, downstream string) error
	// Replay starts replaying downstream's dead letters as r says,
	// replacing the settings of a replay already running there, and
	// returns how many will be replayed: those matching now, capped by
	// r.Limit.
	Replay(ctx context.Context, downstream string, r ReplayRequest) (int, error)
}

// DeadQuery selects dead letters for List.
type DeadQuery struct {
	Reason string // "" = any
	Limit  int    // 1..maxDeadLimit
}

// ReplayRequest is the body of POST /v1/downstreams/{name}/dead/replay,
// validated.
type ReplayRequest struct {
	Rate   float64 // replays per second; 0 = the downstream's rate ÷ 10
	Limit  int     // at most this many; 0 = every match
	Reason string  // "" = any
}

// DeadLetter is one stored dead letter as GET .../dead lists it, and
// DeadLetterDetail one as GET .../dead/{seq} shows it: the admin API's
// bodies, named here for DeadLetters.
type (
	DeadLetter       = api.DeadLetter
	DeadLetterDetail = api.DeadLetterDetail
)

// Bounds of GET .../dead's limit.
const (
	defaultDeadLimit = 100
	maxDeadLimit     = 10000
)

// deadReasons are the reasons a dead letter can carry (docs/dead-letters.md), for the
// reason filters.
var deadReasons = []shaper.Reason{shaper.ReasonFailed, shaper.ReasonExpired, shaper.ReasonShutdown,
	shaper.ReasonRateLimited, shaper.ReasonQueueFull, shaper.ReasonUnknownDownstream,
	shaper.ReasonPayloadTooLarge, shaper.ReasonBadRequest, shaper.ReasonUnavailable, shaper.ReasonWouldExpire}

// deadRoutes adds the dead-letter routes to mux. Every route is behind
// the same auth as the rest of /v1 (the wrapper in Start); the POST and
// DELETEs take the same body bound.
func (h *handlers) deadRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/downstreams/{name}/dead", h.serveDeadList)
	mux.HandleFunc("GET /v1/downstreams/{name}/dead/{seq}", h.serveDeadShow)
	mux.Handle("POST /v1/downstreams/{name}/dead/replay", limitBody(http.HandlerFunc(h.serveDeadReplay)))
	mux.Handle("DELETE /v1/downstreams/{name}/dead/{seq}", limitBody(http.HandlerFunc(h.serveDeadDelete)))
	mux.Handle("DELETE /v1/downstreams/{name}/dead", limitBody(http.HandlerFunc(h.serveDeadPurge)))
}

func (h *handlers) serveDeadList(w http.ResponseWriter, r *http.Request) {
	q, err := parseDeadQuery(r)
	if err != nil {
		badRequest(w, err)
		return
	}
	h.withDead(w, r, func(dl DeadLetters, name string) (int, any, error) {
		list, total, err := dl.List(r.Context(), name, q)
		if list == nil {
			list = []DeadLetter{}
		}
		return http.StatusOK, api.DeadLetterList{DeadLetters: list, Total: total}, err
	})
}

func (h *handlers) serveDeadShow(w http.ResponseWriter, r *http.Request) {
	seq, err := parseSeq(r)
	if err != nil {
		badRequest(w, err)
		return
	}
	h.withDead(w, r, func(dl DeadLetters, name string) (int, any, error) {
		d, err := dl.Get(r.Context(), name, seq)
		if d.Payload == nil {
			d.Payload = []byte{}
		}
		if d.Headers == nil {
			d.Headers = map[string][]string{}
		}
		return http.StatusOK, d, err
	})
}

func (h *handlers) serveDeadReplay(w http.ResponseWriter, r *http.Request) {
	req, err := parseReplay(r)
	if err != nil {
		badRequest(w, err)
		return
	}
	h.withDead(w, r, func(dl DeadLetters, name string) (int, any, error) {
		n, err := dl.Replay(r.Context(), name, req)
		if err == nil {
			rate := "default"
			if req.Rate > 0 {
				rate = strconv.FormatFloat(req.Rate, 'g', -1, 64) + "/s"
			}
			h.Logger.Info("dead-letter replay started through the admin API", "downstream", name,
				"replaying", n, "rate", rate, "reason", req.Reason)
		}
		return http.StatusAccepted, api.ReplayStarted{Replaying: n}, err
	})
}

func (h *handlers) serveDeadDelete(w http.ResponseWriter, r *http.Request) {
	seq, err := parseSeq(r)
	if err != nil {
		badRequest(w, err)
		return
	}
	h.withDead(w, r, func(dl DeadLetters, name string) (int, any, error) {
		return http.StatusNoContent, nil, dl.Delete(r.Context(), name, seq)
	})
}

func (h *handlers) serveDeadPurge(w http.ResponseWriter, r *http.Request) {
	h.withDead(w, r, func(dl DeadLetters, name string) (int, any, error) {
		err := dl.Purge(r.Context(), name)
		if err == nil {
			h.Logger.Info("dead letters purged through the admin API", "downstream", name)
		}
		return http.StatusNoContent, nil, err
	})
}

// withDead runs op on the dead-letter store for the route's downstream
// and writes its answer: status and body on success, 404 for an unknown
// downstream or seq, 503 for every other error (and when there is no
// store). A nil body writes no body (204).
func (h *handlers) withDead(w http.ResponseWriter, r *http.Request, op func(DeadLetters, string) (int, any, error)) {
	name := r.PathValue("name")
	if h.DeadLetters == nil {
		writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: "this daemon keeps no dead-letter store"})
		return
	}
	status, body, err := op(h.DeadLetters, name)
	switch {
	case errors.Is(err, shaper.ErrUnknownDownstream):
		writeJSON(w, http.StatusNotFound, api.Error{
			Error: fmt.Sprintf("no downstream named %q; GET /v1/downstreams lists them", name)})
	case errors.Is(err, deadletter.ErrNotFound):
		writeJSON(w, http.StatusNotFound, api.Error{
			Error: fmt.Sprintf("downstream %q holds no dead letter %s; GET /v1/downstreams/%s/dead lists them",
				name, r.PathValue("seq"), name)})
	case err != nil:
		writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: "dead-letter store: " + err.Error()})
	case body == nil:
		w.WriteHeader(status)
	default:
		writeJSON(w, status, body)
	}
}

// badRequest answers 400 with err's text, which names the field.
func badRequest(w http.ResponseWriter, err error) {
	writeJSON(w, http.StatusBadRequest, api.Error{Error: err.Error()})
}

// parseSeq reads the {seq} path value: a dead letter's stream sequence.
func parseSeq(r *http.Request) (uint64, error) {
	v := r.PathValue("seq")
	seq, err := strconv.ParseUint(v, 10, 64)
	if err != nil || seq == 0 {
		return 0, fmt.Errorf("seq: must be a whole number from 1 (a dead letter's seq, as listed), got %q", truncate(v, 64))
	}
	return seq, nil
}

// parseDeadQuery reads GET .../dead's query: limit (1..10000, default
// 100) and reason; any other parameter is an error.
func parseDeadQuery(r *http.Request) (DeadQuery, error) {
	q := DeadQuery{Limit: defaultDeadLimit}
	for key, vals := range r.URL.Query() {
		if len(vals) != 1 {
			return q, fmt.Errorf("%s: given %d times; give it once", truncate(key, 64), len(vals))
		}
		var err error
		switch key {
		case "limit":
			q.Limit, err = strconv.Atoi(vals[0])
			if err != nil || q.Limit < 1 || q.Limit > maxDeadLimit {
				return q, fmt.Errorf("limit: must be a whole number 1..%d, got %q", maxDeadLimit, truncate(vals[0], 64))
			}
		case "reason":
			q.Reason, err = parseReason(vals[0])
		default:
			return q, fmt.Errorf("%q: unknown query parameter; valid ones: limit, reason", truncate(key, 64))
		}
		if err != nil {
			return q, err
		}
	}
	return q, nil
}

// parseReason checks a reason filter against the reasons a dead letter
// can carry.
func parseReason(v string) (string, error) {
	for _, r := range deadReasons {
		if string(r) == v {
			return v, nil
		}
	}
	valid := ""
	for i, r := range deadReasons {
		if i > 0 {
			valid += ", "
		}
		valid += string(r)
	}
	return "", fmt.Errorf("reason: %q is not a dead-letter reason; valid: %s", truncate(v, 64), valid)
}

// truncate cuts s to n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
