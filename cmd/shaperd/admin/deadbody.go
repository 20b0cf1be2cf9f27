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

	"github.com/shaperd/shaper/cmd/shaperd/admin/api"
	"github.com/shaperd/shaper/config"
)

// replayFields lists api.ReplayBody's fields for error messages.
const replayFields = "rate, limit, reason"

// parseReplay decodes and validates a replay request's body strictly: an
// empty body is every default; an unknown field, a field of the wrong
// type, a second JSON value, a rate that does not parse or is outside
// 1/h..1000000/s, a limit below 1 or an unknown reason is an error naming
// the field and what would be valid. limitBody has bounded the body.
func parseReplay(r *http.Request) (ReplayRequest, error) {
	var req ReplayRequest
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return req, fmt.Errorf("read request body: %w", err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return req, nil
	}
	var b api.ReplayBody
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return req, bodyError(err)
	}
	if dec.More() {
		return req, errors.New("body: one JSON object expected, found more after it")
	}
	return validateReplay(b)
}

// validateReplay turns a decoded body into a request.
func validateReplay(b api.ReplayBody) (ReplayRequest, error) {
	var req ReplayRequest
	if b.Rate != nil {
		rate, err := config.ParseRate(*b.Rate)
		if err != nil {
			return req, fmt.Errorf("rate: %w", err)
		}
		if !(rate >= config.MinRate) || rate > config.MaxRate || math.IsInf(rate, 0) {
			return req, fmt.Errorf("rate: must be 1/h..1000000/s, got %q", truncate(*b.Rate, 64))
		}
		req.Rate = rate
	}
	if b.Limit != nil {
		if *b.Limit < 1 {
			return req, fmt.Errorf("limit: must be a whole number from 1 (leave it out to replay every match), got %d", *b.Limit)
		}
		req.Limit = *b.Limit
	}
	if b.Reason != nil {
		reason, err := parseReason(*b.Reason)
		if err != nil {
			return req, err
		}
		req.Reason = reason
	}
	return req, nil
}

// bodyError rewrites a JSON decoding error so that it names the field.
func bodyError(err error) error {
	var typ *json.UnmarshalTypeError
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &typ):
		want := map[string]string{
			"rate":   `a string such as "5/s" or "120/m"`,
			"limit":  "a whole number from 1",
			"reason": `a string such as "failed"`,
		}[typ.Field]
		if want == "" {
			return fmt.Errorf("body: must be a JSON object with the optional fields %s", replayFields)
		}
		return fmt.Errorf("%s: must be %s, got a JSON %s", typ.Field, want, typ.Value)
	case errors.As(err, &syn), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("body: not valid JSON (%v); send e.g. {\"rate\":\"5/s\",\"limit\":100,\"reason\":\"failed\"}", err)
	}
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("%s: unknown field; valid fields: %s", field, replayFields)
	}
	return fmt.Errorf("body: %v", err)
}
