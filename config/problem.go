package config

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Problem is one thing wrong with a configuration. Load and Validate return
// errors.Join of *Problem, one per line, sorted by key; use errors.As to
// reach the first one. Messages never contain nats.password, nats.token or
// HTTP header values.
type Problem struct {
	Key string // dotted key path, e.g. downstreams.printer.rate; or an env var that sets no key
	Env string // the env var that sets Key; "" for keys that cannot be set by env
	Msg string // what is wrong and what would be valid
}

// Error formats the problem as `key: msg (env ENV)`.
func (p *Problem) Error() string {
	if p.Env == "" {
		return p.Key + ": " + p.Msg
	}
	return p.Key + ": " + p.Msg + " (env " + p.Env + ")"
}

// problems collects every problem of one load or validation.
type problems struct {
	list []*Problem
	bad  map[string]bool // keys already reported while decoding
}

// add reports a problem with a key that env can set, unless the key is in
// a list item (admission.limits[0].rate), which has no env var.
func (ps *problems) add(key, format string, args ...any) {
	env := EnvName(key)
	if strings.Contains(key, "[") {
		env = ""
	}
	ps.list = append(ps.list, &Problem{Key: key, Env: env, Msg: fmt.Sprintf(format, args...)})
}

// addFileOnly reports a problem with a key that only the file can hold
// (an unknown key, a downstream name).
func (ps *problems) addFileOnly(key, format string, args ...any) {
	ps.list = append(ps.list, &Problem{Key: key, Msg: fmt.Sprintf(format, args...)})
}

// markBad records that key failed to decode, so validation stays quiet
// about it and about everything below it.
func (ps *problems) markBad(key string) {
	if ps.bad == nil {
		ps.bad = map[string]bool{}
	}
	ps.bad[key] = true
}

// isBad reports whether key or one of its ancestors failed to decode.
func (ps *problems) isBad(key string) bool {
	for k := key; ; {
		if ps.bad[k] {
			return true
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			return false
		}
		k = k[:i]
	}
}

// err returns the problems sorted by key (stable, so one key's problems keep
// their order), joined; nil if there are none.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	list := slices.Clone(ps.list)
	slices.SortStableFunc(list, func(a, b *Problem) int { return cmp.Compare(a.Key, b.Key) })
	errs := make([]error, len(list))
	for i, p := range list {
		errs[i] = p
	}
	return errors.Join(errs...)
}
