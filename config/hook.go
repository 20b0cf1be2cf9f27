package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// hookError carries the message of a value that does not decode; the loader
// prefixes the key and appends the env var.
type hookError struct{ msg string }

func (e *hookError) Error() string { return e.msg }

func hookErr(err error) error { return &hookError{err.Error()} }

var (
	rateType     = reflect.TypeFor[Rate]()
	sizeType     = reflect.TypeFor[ByteSize]()
	durationType = reflect.TypeFor[time.Duration]()
	weightsType  = reflect.TypeFor[KeyWeights]()
	maintType    = reflect.TypeFor[Maintenance]()
)

// decodeHook is the mapstructure decode hook for every key. Values arrive as
// YAML types from the file, typed values from defaults, or strings from env;
// it parses Rate, ByteSize and time.Duration, and makes ints and bools
// strict (no silently truncated 2.5, no bare-number durations in ns).
func decodeHook(_, to reflect.Type, data any) (any, error) {
	if data == nil || reflect.TypeOf(data) == to {
		return data, nil
	}
	switch to {
	case rateType:
		s, err := scalar(data, "a rate like 2/s")
		if err != nil {
			return nil, err
		}
		r, err := ParseRate(s)
		if err != nil {
			return nil, hookErr(err)
		}
		return Rate(r), nil
	case sizeType:
		s, err := scalar(data, "a size like 1MiB")
		if err != nil {
			return nil, err
		}
		n, err := ParseSize(s)
		if err != nil {
			return nil, hookErr(err)
		}
		return ByteSize(n), nil
	case durationType:
		s, err := scalar(data, "a duration like 10s")
		if err != nil {
			return nil, err
		}
		d, err := parseDuration(s)
		if err != nil {
			return nil, hookErr(err)
		}
		return d, nil
	}
	if to == maintType {
		return maintenanceValue(data)
	}
	if to == weightsType {
		s, err := scalar(data, "weights like gold=3,silver=2")
		if err != nil {
			return nil, err
		}
		return KeyWeights(s), nil
	}
	switch to.Kind() {
	case reflect.Int:
		s, err := scalar(data, "a whole number")
		if err != nil {
			return nil, err
		}
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, strconv.IntSize)
		if err != nil {
			return nil, &hookError{fmt.Sprintf("%q is not a whole number", s)}
		}
		return int(n), nil
	case reflect.Bool:
		s, err := scalar(data, "true or false")
		if err != nil {
			return nil, err
		}
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return nil, &hookError{fmt.Sprintf("%q is not true or false", s)}
		}
		return b, nil
	case reflect.String:
		if _, err := scalar(data, "a single value"); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// scalar returns data as the string it was written as, or an error naming
// what was expected when data is a mapping or list.
func scalar(data any, want string) (string, error) {
	switch v := data.(type) {
	case string:
		return v, nil
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1e15 {
			return strconv.FormatFloat(v, 'f', -1, 64), nil
		}
		return strconv.FormatFloat(v, 'g', -1, 64), nil
	case map[string]any, map[any]any, []any:
		return "", &hookError{fmt.Sprintf("expected %s, got %s", want, describe("", data))}
	default:
		return fmt.Sprint(v), nil
	}
}

// describe names a raw value for a message; secrets are never shown.
func describe(key string, raw any) string {
	switch raw.(type) {
	case map[string]any, map[any]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	if isSecret(key) {
		return "a value (hidden)"
	}
	return quote(fmt.Sprint(raw))
}

func isList(raw any) bool {
	_, ok := raw.([]any)
	return ok
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a single value"
	case reflect.Int:
		return "a whole number"
	case reflect.Bool:
		return "true or false"
	}
	return "a single value"
}

func quote(s string) string { return strconv.Quote(s) }
